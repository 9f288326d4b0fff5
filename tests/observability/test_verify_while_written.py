"""`--verify` (observability/chain_verify.py) while a real `strata run` appends to the session: an honest
concurrent write is never reported as tampering.

Before, the check read the head, the rows, the head again, and only then the receipts table: a receipt committed
after the second head read (its timeline row unread) was named as changed or added outside Strata (seen 9 of 286
runs on PostgreSQL). The writer here is a real process whose bash calls each wait for a file the test creates; the
test lets the next call through at the moment the check reads the receipts, and waits for its commits, so the
interleaving that failed is the one tested, every time, on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from memory import SqliteEventStore
from memory.rows import Receipt, ReceiptStatus
from memory.store import EventStore
from observability.chain_verify import verify_chains
from tests._in_process_cli import json_lines_in_process
from tests._postgres import Cluster
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI

CALLS = 3


def _script(path: Path) -> Path:
    """CALLS bash calls, one a turn; call K says it runs (`at.K`) and waits for `go.K` (for at most 300 s: a test
    that fails kills the writer, and the command it left running must not poll for ever)."""
    turns = [[tool_use(f"c{k}", "bash",
                       command=f"touch at.{k}; while [ ! -e go.{k} ] && [ $SECONDS -lt 300 ]; do sleep 0.01; done")]
             for k in range(1, CALLS + 1)]
    path.write_text(json.dumps([*turns, [text("done")]]), encoding="utf-8")
    return path


def _until(path: Path, writer: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert writer.poll() is None, writer.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)


class _Gate:
    """Lets the writer's call `k` finish at the moment the check reads the receipts table (the first time: a check
    whose head moved reads them again, and the writer is then held), and waits until the writer committed it (its
    receipt `done`) and the next call's receipt (`dispatched`, its bash running)."""

    def __init__(self, workspace: Path, writer: subprocess.Popen[str]) -> None:
        self.workspace = workspace
        self.writer = writer
        self.k = 1
        self.armed = False

    def open(self) -> None:
        if not self.armed:
            return
        self.armed = False
        (self.workspace / f"go.{self.k}").touch()
        self.k += 1
        _until(self.workspace / f"at.{self.k}", self.writer)


def _gated(base: type[Any], gate: _Gate) -> type[Any]:
    """`base`, the real store, reading its receipts only once the gate let the writer on."""

    class Gated(base):
        async def list_receipts(self, session_id: str | None = None,
                                status: ReceiptStatus | None = None) -> list[Receipt]:
            gate.open()
            return await super().list_receipts(session_id, status)

    return Gated


@asynccontextmanager
async def _store(backend: str, cli: StrataCLI, gate: _Gate) -> AsyncIterator[EventStore]:
    if backend == "sqlite":
        store: EventStore = await _gated(SqliteEventStore, gate).open(cli.home / "strata.db")
    else:
        from memory.postgres import PostgresEventStore

        assert cli.store_url is not None
        store = await _gated(PostgresEventStore, gate).open(cli.store_url, home=cli.home)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def writing_cli(request: pytest.FixtureRequest, strata_home: Path, tmp_path: Path) -> Iterator[StrataCLI]:
    """The `strata` of a SQLite home, or of a fresh PostgreSQL database (skipped, saying why, without one)."""
    if request.param == "sqlite":
        yield StrataCLI(strata_home, tmp_path)
        return
    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    with cluster.database() as url:
        yield StrataCLI(strata_home, tmp_path, store_url=url)


async def test_receipts_committed_while_verify_reads_are_not_reported_as_tampering(
        writing_cli: StrataCLI, tmp_path: Path, workspace: Path) -> None:
    """Each check lets one of the writer's calls finish while it reads the receipts: the check verifies (a note
    says the session was written meanwhile), never a receipt "changed" or "added outside Strata"; once the writer
    is done, the whole session verifies with no note."""
    cli = writing_cli
    writer = cli.popen("run", "--model", f"script:{_script(tmp_path / 's.json')}", "--workspace", str(workspace),
                       "--allow", "bash", "go")
    try:
        _until(workspace / "at.1", writer)
        (session,) = json_lines_in_process(cli, "sessions", "--json")
        gate = _Gate(workspace, writer)
        async with _store("sqlite" if cli.store_url is None else "postgres", cli, gate) as store:
            for _ in range(CALLS - 1):
                gate.armed = True
                report = await verify_chains(store, session["id"], None)
                assert report.problems == (), report.problems
                assert any("written to while it was checked" in note for note in report.notes), report.notes
                assert not any("receipts table was not compared" in note for note in report.notes), report.notes
        (workspace / f"go.{CALLS}").touch()
        _, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.communicate()
    verified = cli.run("timeline", session["id"], "--verify", "--json")
    assert verified.returncode == 0, (verified.stdout, verified.stderr)
