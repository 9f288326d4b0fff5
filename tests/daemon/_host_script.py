"""A small hosting process for the real-process tests, doing what `strata serve` will do without the socket: it
opens the runtime as `strata run` does, hosts one session per entry of its spec (a JSON argument: workspace and
model of each, the drain's grace), attaches a driver to each and prompts it, prints every message each attachment
gets as one JSON line (as `strata attach --json` will), and drains on SIGTERM, as the daemon will.

Run: python -m tests.daemon._host_script SPEC_JSON, with STRATA_HOME (and PYTHONPATH) set."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Any

import anyio

from agent.daemon import Attachment, SessionHost
from agent.session import Runtime
from config import load_config
from core.policy import parse_rule
from observability import attach_home, configure_logging


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def pump(attachment: Attachment) -> None:
    async for message in attachment:
        emit(message.view())


async def main(spec: dict[str, Any]) -> None:
    configure_logging(False)  # the entry point configures logging, never the host
    config = load_config(workspace=None)
    rt = await Runtime.open(config)
    attach_home(config.settings.home, rt.masker)
    try:
        with anyio.open_signal_receiver(signal.SIGTERM) as signals:
            async with SessionHost.open(rt) as host, anyio.create_task_group() as tg:
                for entry in spec["sessions"]:
                    sid = await host.new_session(workspace=Path(entry["workspace"]), model=entry["model"],
                                                 rules=[parse_rule("allow", "bash")])
                    attachment = await host.attach(sid, "drive")
                    tg.start_soon(pump, attachment)
                    await host.prompt(attachment, "go")
                    emit({"type": "hosted", "session_id": sid, "workspace": entry["workspace"]})
                async for signum in signals:
                    emit({"type": "draining", "signal": signum})
                    await host.drain(spec["grace_s"], signal=signal.Signals(signum))
                    break
    finally:
        with anyio.CancelScope(shield=True):
            await rt.close()
    emit({"type": "exit"})


if __name__ == "__main__":
    anyio.run(main, json.loads(sys.argv[1]))
