"""``antiloop serve`` applies the config's [budgets] to the steps posted to it."""

# ruff: noqa: S105  (a fixed test token)

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from antiloop.commands.serve import load
from antiloop.server import Service, create_app

TOKEN = "test-token-123"


def test_posted_usage_counts_against_the_budgets(tmp_path: Path) -> None:
    """Steps with cost_usd add up per session; past the hard limit the service says stop."""
    config = tmp_path / "antiloop.toml"
    config.write_text('embedder = "ngram"\n[budgets.session]\nhard_usd = 1.0\n')
    guard_config, policy, budgets = load(str(config))
    service = Service(
        f"sqlite:///{tmp_path / 'a.db'}",
        TOKEN,
        config=guard_config,  # type: ignore[arg-type]
        policy=policy,  # type: ignore[arg-type]
        budgets=budgets,  # type: ignore[arg-type]
    )
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(service)) as client:
        answers = [
            client.post(
                "/v1/steps",
                json={
                    "session": "s",
                    "tool": "Read",
                    "args": {"file_path": f"{i}.py"},
                    "output": str(i),
                    "cost_usd": 0.4,
                },
                headers=headers,
            ).json()
            for i in range(3)
        ]
    assert [a["action"] for a in answers] == ["continue", "continue", "stop"]
    assert (answers[2]["detector"], answers[2]["outcome"]) == ("budget", "budget")
    service.store.close()
