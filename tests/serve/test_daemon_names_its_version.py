"""The daemon names itself in its hello reply with Strata's version, which is written once (core/version.py) and is
the installed distribution's version too (pyproject.toml takes it from there)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import anyio

from agent.ipc import IpcClient
from core.version import VERSION
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon


def test_the_installed_distribution_has_the_version_core_names() -> None:
    assert importlib.metadata.version("strata") == VERSION


def test_a_hello_to_strata_serve_is_answered_naming_strata_and_its_version(cli: StrataCLI) -> None:
    daemon = Daemon(cli)
    try:
        (listening,) = [line for line in daemon.out.seen if "listening on" in line]
        found = re.search(r"listening on (\S+) \(pid", listening)
        assert found is not None, listening

        async def hello() -> str:
            async with IpcClient.connect(Path(found.group(1))) as client:
                return client.hello.server

        assert anyio.run(hello) == f"strata {VERSION}"
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
