"""A serve daemon with spool channels, for the channel acceptance tests: the user's config file names the
channels, a message is a JSON file dropped into the inbox (written then renamed, as a writer must), a reply is a
file in the outbox. Every wait is on a condition."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from core.events import EventAdapter
from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import text, tool_use
from tests.conftest import StrataCLI
from tests.serve._procs import Daemon, script, wait_until


def write_config(cli: StrataCLI, body: str) -> None:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


def spool_table(name: str, root: Path, workspace: Path, model: str, **extra: str) -> str:
    lines = [f'[[channels]]\nname = "{name}"\nkind = "spool"\ninbox = "{root / "in"}"\noutbox = "{root / "out"}"\n'
             f'workspace = "{workspace}"\nmodel = "{model}"\n']
    lines += [f"{k} = {v}\n" for k, v in extra.items()]
    return "".join(lines) + "\n"


PARKS_THEN_ANSWERS = ([tool_use("b1", "bash", command="touch ran-$$")], [text("the tests ran")],
                      [text("second answered")])
"""A thread's session for `parking_channel`: its first turn parks on b1 (which touches `ran-PID`); the turn that goes
on after the decision answers; the thread's second message is answered."""


def parking_channel(cli: StrataCLI, tmp_path: Path, *turns: list[dict[str, Any]],
                    settings: str = "", model: str | None = None) -> tuple[Path, Path]:
    """The user's config for a spool channel `park` whose sessions may run `bash` and park a call that asks
    (on_ask park), on the scripted `turns` (or on `model`, say `anthropic:NAME` against a loopback Messages API,
    without turns), with top-level `settings` lines before it (say `max_turns = 1`). Returns the channel's
    workspace (made) and its spool root."""
    assert (model is None) != (not turns), "scripted turns or another model, not both"
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = model or script(tmp_path / "s.json", *turns)
    write_config(cli, settings + '[daemon]\nenable = ["bash"]\n\n' + spool_table("park", spool, ws, model,
                                                                                   on_ask='"park"'))
    return ws, spool


def task_statuses(cli: StrataCLI) -> dict[str, str]:
    """The tasks `strata tasks` lists: message id -> status, read in this process (tests/_in_process_cli.py; the
    command's own process is tested by tests/channels/test_spool_round_trip.py)."""
    return {t["message"]: t["status"] for t in json_lines_in_process(cli, "tasks", "--json")}


def drop(inbox: Path, name: str, **message: Any) -> None:
    inbox.mkdir(parents=True, exist_ok=True)
    tmp = inbox / f".{name}.tmp"
    tmp.write_text(json.dumps(message), encoding="utf-8")
    os.replace(tmp, inbox / f"{name}.json")


def replies(outbox: Path) -> list[dict[str, Any]]:
    if not outbox.is_dir():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(outbox.glob("*.json"))]


def pending(inbox: Path) -> list[str]:
    return sorted(p.name for p in inbox.glob("*.json")) if inbox.is_dir() else []


def deferrals(home: Path, message_id: str) -> int:
    """How many times the daemons of `home` have put the message `message_id` off so far (each offer of a queued
    message that its thread's session could not take yet logs one "... the message stays queued" line)."""
    log = home / "logs" / "strata.log"
    if not log.is_file():
        return 0
    count = 0
    for line in log.read_text(encoding="utf-8").splitlines():
        if "stays queued" in line and f'"{message_id}"' in line:
            record = json.loads(line)
            count += "stays queued" in record.get("event", "") and record.get("message_id") == message_id
    return count


def session_events(home: Path, session_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    with sqlite3.connect(f"file:{home / 'strata.db'}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT seq, kind, payload FROM session_events WHERE session_id = ? ORDER BY seq",
                            (session_id,)).fetchall()
    # Every field, as the event reads back (the stored JSON leaves out the ones at their default).
    return [(seq, kind, EventAdapter.validate_json(payload).model_dump(mode="json")) for seq, kind, payload in rows]


def session_ids(home: Path) -> list[str]:
    with sqlite3.connect(f"file:{home / 'strata.db'}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY num")]


def user_texts(home: Path, session_id: str) -> list[str]:
    out = []
    for _, kind, payload in session_events(home, session_id):
        if kind == "user_message":
            out.append(json.dumps(payload))
    return out


def tasks_made_from(cli: StrataCLI, tmp_path: Path, messages: dict[str, str]) -> dict[str, str]:
    """Each message (id -> text) dropped on a thread of its own into a spool channel of a real daemon, one at a
    time, each answered before the next; the daemon stopped cleanly. Returns the tasks the gate made: message id ->
    the rule that decided."""
    ws = tmp_path / "ws"
    ws.mkdir()
    spool = tmp_path / "spool"
    model = script(tmp_path / "s.json", *([text(f"answer {i}")] for i in range(len(messages))))
    write_config(cli, spool_table("team", spool, ws, model))
    daemon = Daemon(cli)
    try:
        for n, (mid, body) in enumerate(messages.items()):
            drop(spool / "in", mid, thread=f"t{n}", id=mid, sender="anna@example.com", text=body)
            wait_until(lambda n=n: len(replies(spool / "out")) == n + 1 and not pending(spool / "in"),
                       what=f"the reply to {mid}")
    finally:
        daemon.stop()
    assert daemon.proc.returncode == 0, daemon.stderr
    return {t["message"]: t["rule"] for t in json_lines_in_process(cli, "tasks", "--json")}
