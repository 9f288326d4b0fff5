"""`strata` as if on another machine, for the PostgreSQL tests of several workers on one database: a launcher
script (the test's own) patches the host name (so this machine cannot check the process's pid, only its lease's
expiry), shortens the leases, and may add a fault of its own before it runs the command line."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.conftest import StrataCLI


class OtherMachine(StrataCLI):
    """`strata` through `launcher`, called as `launcher HOST TTL_S ARGS...`."""

    def __init__(self, home: Path, cwd: Path, *, store_url: str, launcher: Path, host: str, ttl_s: float) -> None:
        super().__init__(home, cwd, store_url=store_url)
        self._prefix = [sys.executable, str(launcher), host, str(ttl_s)]

    def argv(self, args: list[str] | tuple[str, ...]) -> list[str]:  # type: ignore[override]
        return [*self._prefix, *args]
