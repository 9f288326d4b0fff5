"""A Strata process loads no third-party pydantic plugins.

Pydantic looks for plugins when it builds its first model: it imports `importlib.metadata` (and with it `email`,
`zipfile`, `importlib.resources`) and reads the entry points of every installed distribution, then hands each
plugin every value validated in the process. Strata validates raw conversation content (tool results before
masking, secrets included) with pydantic, so a plugin installed in the same environment for another program
would see it; and the search costs about a tenth of `strata resume`'s start (bench/cli_startup.py).

So before a command's modules are imported the CLI puts a loader in pydantic's place that finds no plugin.
Pydantic's public switch (`PYDANTIC_DISABLE_PLUGINS`) is not used: as an environment variable it would reach the
tools' subprocesses, and it skips only the search, not the import. The one name pydantic imports from its loader
is `get_plugins` (tests/cli/test_startup_imports.py checks the installed pydantic still imports nothing else)."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterable

LOADER = "pydantic.plugin._loader"


def _no_plugins() -> Iterable[object]:
    return ()


def refuse_pydantic_plugins() -> None:
    """Install the loader that finds no plugin, unless pydantic's own already ran (a model was built before)."""
    if LOADER in sys.modules:
        return
    loader = types.ModuleType(LOADER, "Strata: no pydantic plugins in this process (agent/cli/startup_pydantic.py)")
    loader.get_plugins = _no_plugins  # type: ignore[attr-defined]
    sys.modules[LOADER] = loader
