"""``redis+sentinel://`` URLs: what they name, and a clear error for one that names no master.

(The failover itself, with real sentinels, is in test_outage_fleet.py.)
"""

from __future__ import annotations

import pytest

from antiloop.core.errors import ConfigError, StoreError
from antiloop.stores import open_store


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis+sentinel://h1:26379,h2/mymaster/0", "'h2'"),
        ("redis+sentinel://h1:26379", "master's name"),
        ("redis+sentinel://h1:26379/mymaster/zero", "master's name"),
    ],
)
def test_a_bad_sentinel_url_is_named_in_one_line(url: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named) as caught:
        open_store(url)
    assert "\n" not in str(caught.value)


def test_no_live_sentinel_is_one_store_error_naming_them() -> None:
    store = open_store("redis+sentinel://:s3cret@127.0.0.1:1,127.0.0.1:2/mymaster/3?timeout=0.5")
    try:
        assert store.url == "redis+sentinel://:***@127.0.0.1:1,127.0.0.1:2/mymaster/3"
        with pytest.raises(StoreError) as caught:
            store.peek("s")
        text = str(caught.value)
        assert "no Sentinel of 127.0.0.1:1,127.0.0.1:2 names a live master 'mymaster'" in text
        assert "s3cret" not in text
    finally:
        store.close()
