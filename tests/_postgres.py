"""A throwaway PostgreSQL cluster for the tests: initdb in a temporary directory, started on a free loopback port
with pg_ctl, stopped at the end of the test session. Nothing to set up beforehand; where PostgreSQL is not
installed the tests that need it skip with one reason (tests/_system.py), and CI makes that a failure.

Run as root, the cluster belongs to `nobody` (PostgreSQL refuses to run as root). fsync is off for the tests (they
test behaviour, not the disk); bench/postgres.py starts it with the server's defaults (`durable=True`)."""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests._system import POSTGRES

_NOBODY = 65534
_names = itertools.count(1)


@dataclass
class Cluster:
    bin: Path
    root: Path
    port: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://strata@127.0.0.1:{self.port}/{database}"

    def restart(self) -> None:
        """Restart the server (`pg_ctl restart -m fast`, as an operator would): every connection is ended."""
        as_root = os.geteuid() == 0
        _run([str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-l", str(self.root / "server.log"), "-m",
              "fast", "-w", "-t", "60", "restart"], as_root=as_root)

    def stop(self) -> None:
        """Stop the server (`pg_ctl stop -m fast`): every connection is ended and none is accepted until `start`."""
        _run([str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "fast", "-w", "-t", "60", "stop"],
             as_root=os.geteuid() == 0)

    def start(self) -> None:
        """Start a server `stop` stopped, on the same port, with the options it ran with."""
        _run([str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-l", str(self.root / "server.log"), "-w",
              "-t", "60", "-o", _options(self.port, self.root / "sock", durable=False), "start"],
             as_root=os.geteuid() == 0)

    def new_database(self) -> str:
        """A fresh, empty database on the cluster; its URL."""
        name = f"t{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        """A fresh, empty database for one test, dropped afterwards (its connections ended). Each database is
        ~8 MB in ~300 files: the conformance suite's hundred-odd, all kept to the end of the session, made the
        cluster's removal at the last test of a worker take 3 s on a quiet machine and 30 s under load."""
        url = self.new_database()
        try:
            yield url
        finally:
            with psycopg.connect(self.url(), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def rows(url: str, sql: str, *args: object) -> list[tuple[object, ...]]:
    """The rows of one query, on a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        return list(conn.execute(sql.encode(), args).fetchall())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _run(cmd: list[str], *, as_root: bool) -> None:
    kwargs = {"user": _NOBODY, "group": _NOBODY} if as_root else {}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stdout}{done.stderr}")


def _options(port: int, sock: Path, *, durable: bool) -> str:
    return f"{'' if durable else '-F '}-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c max_connections=200"


def start_cluster(*, durable: bool = False) -> Iterator[Cluster]:
    """Start a cluster (a generator fixture body: yields it, stops and removes it afterwards). `durable`: fsync on,
    as a server runs by default (the benchmarks); off for the tests."""
    initdb = Path(POSTGRES.require())
    root = Path(tempfile.mkdtemp(prefix="strata-pg-"))
    as_root = os.geteuid() == 0
    if as_root:
        os.chown(root, _NOBODY, _NOBODY)
    data, sock = root / "data", root / "sock"
    pg_ctl = str(initdb.parent / "pg_ctl")
    try:
        _run([str(initdb), "-D", str(data), "-U", "strata", "--auth=trust", "-E", "UTF8", "--no-sync",
              "--no-instructions"], as_root=as_root)
        _run(["mkdir", "-p", str(sock)], as_root=as_root)
        port = _free_port()
        _run([pg_ctl, "-D", str(data), "-l", str(root / "server.log"), "-w", "-t", "60", "-o",
              _options(port, sock, durable=durable), "start"], as_root=as_root)
        try:
            yield Cluster(initdb.parent, root, port)
        finally:
            _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], as_root=as_root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
