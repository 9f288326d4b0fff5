"""`strata serve`'s body: the runtime, the session host and the IPC server in one process, until a signal (or a
client's `shutdown`) drains it.

Startup claims the home before anything else is opened: the IPC server's lock (agent/ipc/_endpoint.py) refuses a
second daemon of the same home, naming the first one's pid. Then the runtime is built from the config as
`strata run` builds it, the host opens on it and the socket is published; `ready` is told where it listens.

SIGTERM, SIGHUP and SIGINT (and a `shutdown` request) drain: no new turn starts, a call waiting for a driver's
approval parks, running calls get `grace_s`, then the batches still open are closed exactly as Ctrl-C closes them
(agent/daemon/_host.py `drain`); every attachment ends with a notice, every connection with a goodbye, and every
session is left resumable. A second signal during the drain changes nothing: the drain is already bounded."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import structlog

from agent import ipc
from agent.channels import ChannelRunner
from agent.daemon import SessionHost
from agent.models import model_from_spec
from agent.serve._dispatcher import HostDispatcher
from agent.session import Runtime
from config import LoadedConfig, load_config
from core.errors import StrataError
from core.version import VERSION
from memory import SqliteEventStore
from memory.store import EventStore
from observability import attach_home

log = structlog.get_logger("strata.serve")

DRAIN_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def server_name() -> str:
    return f"strata {VERSION}"  # core/version.py: not importlib.metadata (~8 ms of each start)


def store_counts(store: EventStore) -> ipc.StoreCounts:
    """What the `status` reply says of the store: its commits, and the fsyncs that made them durable (a SQLite
    store's group commit lets one fsync carry several commits)."""
    fsyncs = store.fsyncs if isinstance(store, SqliteEventStore) else None
    return ipc.StoreCounts(commits=store.commits, fsyncs=fsyncs)


async def serve(loaded: LoadedConfig, *, socket_path: Path | None = None, grace_s: float | None = None,
                ready: Callable[[ipc.DaemonPaths], None] = lambda paths: None) -> None:
    """Run the daemon until it is drained. Raises DaemonRunning or SocketUnusable (exit 2) before it listens,
    and the runtime's own errors (a bad config, an unusable store)."""
    settings = loaded.settings
    grace = settings.drain_grace_s if grace_s is None else grace_s
    home = settings.home
    paths = ipc.daemon_paths(home, socket_path)
    lock = await anyio.to_thread.run_sync(ipc.claim_home, paths)  # before the store is opened: one daemon a home
    ipc.log_loop_errors()
    try:
        rt = await Runtime.open(loaded)
        attach_home(home, rt.masker)  # the daemon's log: <home>/logs/strata.log, masked by the home's key
        try:
            await _run(rt, lock, paths, grace, settings.max_turns, ready,
                       partial(_workspace_config, loaded), loaded)
        except BaseExceptionGroup as group:  # the task groups wrap a refusal to listen (SocketUnusable): one line
            raise _lone_error(group) from None
        finally:
            with anyio.CancelScope(shield=True):
                await rt.close()
            log.info("runtime closed")
    finally:
        lock.release()


def _lone_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one StrataError nested task groups wrapped, as itself; the group unchanged otherwise."""
    leaves: list[BaseException] = []

    def collect(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                collect(inner)
        else:
            leaves.append(exc)

    collect(group)
    return leaves[0] if len(leaves) == 1 and isinstance(leaves[0], StrataError) else group


def _workspace_config(loaded: LoadedConfig, workspace: Path) -> LoadedConfig:
    """The daemon's config with `workspace`'s project file: what `strata run` in that workspace loads (the
    daemon's own has no project layer). Its notices (an untrusted project file) are the client's to show."""
    return load_config(workspace=workspace, flags={"home": loaded.settings.home})


async def _run(rt: Runtime, lock: ipc.DaemonLock, paths: ipc.DaemonPaths, grace_s: float, max_turns: int,
               ready: Callable[[ipc.DaemonPaths], None],
               workspace_config: Callable[[Path], LoadedConfig], loaded: LoadedConfig) -> None:
    stop = anyio.Event()
    asked: list[signal.Signals] = []
    failed: list[str] = []

    def on_listener_failure(reason: str) -> None:  # nobody can reach the daemon: it drains and exits non-zero
        failed.append(reason)
        log.error("the daemon's socket failed: draining", reason=reason, grace_s=grace_s)
        stop.set()

    async def on_signals() -> None:
        with anyio.open_signal_receiver(*DRAIN_SIGNALS) as received:
            async for signum in received:
                if not asked:
                    asked.append(signal.Signals(signum))
                    log.info("signal received: draining", signal=signal.Signals(signum).name, grace_s=grace_s)
                    stop.set()
                else:
                    log.info("signal received during the drain; the drain goes on", signal=signal.Signals(signum).name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(on_signals)
        async with SessionHost.open(rt, model_factory=model_from_spec, max_turns=max_turns,
                                    max_sessions=loaded.channels.max_sessions,
                                    workspace_config=workspace_config) as host, \
                ChannelRunner.open(rt, loaded, model_factory=model_from_spec,
                                   workspace_config=workspace_config) as channels:
            dispatcher = HostDispatcher(host, tg, rt.masker, on_shutdown=stop.set,
                                        store_counts=lambda: store_counts(rt.store))
            async with ipc.IpcServer.open(paths.home, dispatcher, socket_path=paths.socket, lock=lock,
                                          server_name=server_name(), on_failure=on_listener_failure) as server, \
                    anyio.create_task_group() as serving:
                await serving.start(server.serve)
                log.info("daemon serving", pid=os.getpid(), socket=str(paths.socket))
                ready(paths)
                await stop.wait()
                await channels.drain(grace_s)
                await host.drain(grace_s, signal=asked[0] if asked else None)
                server.stop()  # a goodbye to every client; `serve` returns once they are gone
        tg.cancel_scope.cancel()
    if failed:
        raise ipc.ListenerFailed(str(paths.socket), failed[0])
    log.info("daemon stopped")
