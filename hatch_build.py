"""The wheel's build hook: the native hook client, ``antiloop-hook``, where a C compiler is.

Built from ``src/antiloop/hooks/native/antiloop_hook.c`` into the wheel's scripts (installed
beside ``antiloop``); the wheel is then tagged for this platform (``py3-none-<platform>``, or
the interpreter's tag in the compiled build). Without a compiler, or with
``ANTILOOP_NATIVE=0``, the wheel stays pure Python and the hook the Python client. The editable
install is left alone: ``make`` builds the client into the venv.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compile ``antiloop-hook`` and add it to the wheel's scripts."""

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get("ANTILOOP_NATIVE", "1").strip().lower() in ("0", "off", "no", "false"):
            return
        native = Path(self.root, "src", "antiloop", "hooks", "native", "__init__.py")
        spec = importlib.util.spec_from_file_location("antiloop_native_build", native)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self._tmp = tempfile.TemporaryDirectory(prefix="antiloop-native-")
        built = module.build(Path(self._tmp.name, "antiloop-hook"))
        if built is None:
            return
        from packaging.tags import sys_tags

        build_data["shared_scripts"][str(built)] = "antiloop-hook"
        build_data["pure_python"] = False
        if os.environ.get("HATCH_BUILD_HOOK_ENABLE_MYPYC", "").lower() == "true":
            build_data["infer_tag"] = True  # compiled modules: this interpreter's tag
        else:  # any Python 3 of this platform: the client is C, the package pure Python
            build_data["tag"] = f"py3-none-{next(iter(sys_tags())).platform}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp is not None:
            tmp.cleanup()
