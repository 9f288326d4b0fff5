"""A real daemon process for the tests: the IPC server with the fake session side, logging to the home like
`strata serve` will. Prints `READY <pid>` once it listens; SIGTERM (or a `shutdown` request) stops it.

    python -m tests.ipc._serve_fake HOME [--socket PATH] [--max-connections N] [--hello-timeout S]
        [--send-timeout S] [--idle-timeout S] [--max-files N] [--child-sleep S]

`--max-files N` lowers the process's descriptor limit to N (RLIMIT_NOFILE), so that a test can run it out of them.
A refused start prints the error's one line (and hint) on stderr and exits with the error's code, as the CLI does.
`--child-sleep` starts a `sleep S` child first (inheriting every descriptor it may), like a session's command
that outlives a killed daemon."""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import anyio
from anyio.abc import TaskGroup, TaskStatus

from agent.ipc import IpcServer, Limits
from config.seen_secrets import home_masker
from core.errors import StrataError
from observability import attach_home, configure_logging
from tests.ipc._fake_dispatcher import FakeDispatcher


async def main(args: argparse.Namespace) -> int:
    home = Path(args.home)
    if args.max_files:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.max_files, args.max_files))
    configure_logging(verbose=False)
    attach_home(home, home_masker(home, {}))
    limits = Limits(max_connections=args.max_connections, hello_timeout_s=args.hello_timeout,
                    send_timeout_s=args.send_timeout, idle_timeout_s=args.idle_timeout)
    stopper: list[IpcServer] = []
    dispatcher = FakeDispatcher(stop=lambda: stopper[0].stop())
    try:
        async with IpcServer.open(home, dispatcher, socket_path=Path(args.socket) if args.socket else None,
                                  limits=limits, server_name="strata-test") as server:
            stopper.append(server)
            if args.child_sleep:
                child = await anyio.to_thread.run_sync(lambda: subprocess.Popen(
                    ["sleep", str(args.child_sleep)], close_fds=False, start_new_session=True))
                print(f"CHILD {child.pid}", flush=True)
            async with anyio.create_task_group() as tg:
                tg.start_soon(_stop_on_sigterm, server)
                await tg.start(_serve_then_end, server, tg)
                print(f"READY {os.getpid()}", flush=True)
    except StrataError as exc:
        print(f"strata: error: {exc.message}" + (f"\n  hint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return exc.exit_code
    return 0


async def _stop_on_sigterm(server: IpcServer) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            server.stop()
            return


async def _serve_then_end(server: IpcServer, tg: TaskGroup, *, task_status: TaskStatus[None]) -> None:
    """Serve until stopped, then end the signal task too."""
    await server.serve(task_status=task_status)
    tg.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("--socket")
    parser.add_argument("--max-connections", type=int, default=64)
    parser.add_argument("--hello-timeout", type=float, default=10.0)
    parser.add_argument("--send-timeout", type=float, default=10.0)
    parser.add_argument("--idle-timeout", type=float, default=60.0)
    parser.add_argument("--max-files", type=int, default=0)
    parser.add_argument("--child-sleep", type=float, default=0)
    sys.exit(anyio.run(main, parser.parse_args()))
