"""`strata channels [--json]` and `strata tasks [--json]`: the serve daemon's channels as configured, with what
their book says (threads, last message, backlog), and the tasks the action-required gate created. Reading
commands: the book is opened read-only and nothing is created in the home."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from agent.cli._common import Command, json_option
from agent.cli.output import echo, echo_json
from config import ChannelEntry, Settings
from core.errors import StoreError
from memory.channel_book import ChannelBook, IntakeRow, TaskRow, ThreadRow


def _book(settings: Settings) -> tuple[list[ThreadRow], list[IntakeRow], list[TaskRow]]:
    book = ChannelBook.open_for(settings, read_only=True)
    if book is None:
        return [], [], []
    try:
        return book.threads(), book.intakes(), book.tasks()
    finally:
        book.close()


def _backlog(entry: ChannelEntry, home: Path) -> int | None:
    inbox = Path(entry.inbox).expanduser() if entry.inbox else home / "channels" / entry.name / "in"
    try:
        with os.scandir(inbox) as entries:
            return sum(1 for e in entries if e.name.endswith(".json") and not e.name.startswith("."))
    except OSError:
        return None


@click.command()
@json_option
def channels(as_json: bool) -> None:
    """The serve daemon's channels: kind, where they listen, threads, last message, backlog."""
    cmd = Command()
    loaded = cmd.config(None, quiet=True)
    home = loaded.settings.home
    try:
        threads, intakes, _ = _book(loaded.settings)
    except StoreError as err:
        cmd.fail(err)
    mask = cmd.masker.mask
    views: list[dict[str, Any]] = []
    for entry in loaded.channels.channels:
        mine = [i for i in intakes if i.channel == entry.name]
        last = mine[-1] if mine else None
        views.append({
            "name": entry.name, "kind": entry.kind,
            "where": (f"{entry.inbox} -> {entry.outbox}" if entry.kind == "spool" else f"http://127.0.0.1:{entry.port}"),
            "threads_allowed": list(entry.threads), "on_ask": entry.on_ask, "workspace": entry.workspace,
            "threads": sum(1 for t in threads if t.channel == entry.name),
            "messages": len(mine), "unacknowledged": sum(1 for i in mine if i.status != "acked"),
            "backlog": _backlog(entry, home),
            "last_message": None if last is None else {"id": mask(last.message_id), "thread": mask(last.thread_id),
                                                       "at": last.at, "status": last.status},
        })
    if as_json:
        for v in views:
            echo_json(v)
        return
    if not views:
        echo("no channels configured (add [[channels]] to the user's config file; see the README)")
        return
    daemon = loaded.channels
    echo(f"DAEMON mode: turn budget {daemon.turn_budget_s:g} s; threads at once {daemon.max_workers}; "
         "execute/admin tools enabled: "
         f"{', '.join(daemon.enable) or 'none'}")
    echo(f"{'name':<16} {'kind':<8} {'threads':>7} {'messages':>8} {'backlog':>7}  {'last message':<40}  where")
    for v in views:
        last = v["last_message"]
        shown = f"{last['id']} ({last['status']}, {last['at'][:19]})" if last else "-"
        backlog = "?" if v["backlog"] is None else str(v["backlog"])
        echo(f"{v['name']:<16} {v['kind']:<8} {v['threads']:>7} {v['messages']:>8} {backlog:>7}  {shown:<40}  "
             f"{v['where']}")


@click.command()
@json_option
def tasks(as_json: bool) -> None:
    """The tasks the action-required gate created from channel messages, oldest first."""
    cmd = Command()
    loaded = cmd.config(None, quiet=True)
    try:
        _, _, rows = _book(loaded.settings)
    except StoreError as err:
        cmd.fail(err)
    mask = cmd.masker.mask
    views: list[dict[str, Any]] = [
        {"id": t.id, "channel": t.channel, "thread": mask(t.thread_id), "message": mask(t.message_id),
         "status": t.status, "session": t.session_id, "rule": t.rule, "created_at": t.created_at} for t in rows]
    if as_json:
        for v in views:
            echo_json(v)
        return
    if not views:
        echo("no tasks yet")
        return
    echo(f"{'id':>5}  {'status':<8} {'rule':<11} {'channel':<16} {'thread':<20} {'message':<24} session")
    for v in views:
        echo(f"{v['id']:>5}  {v['status']:<8} {v['rule']:<11} {v['channel']:<16} {v['thread'][:20]:<20} "
             f"{v['message'][:24]:<24} {v['session']}")
