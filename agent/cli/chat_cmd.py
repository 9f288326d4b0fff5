"""`strata chat [--resume ID | --continue]`: the interactive terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import click

from agent.cli._common import Command, notices, waiver
from agent.cli.options import WorkspacePath
from agent.models import close_model, model_from_spec
from agent.session import Asking, LiveSession, Runtime, resume_session, start_session
from agent.terminal.safe_text import SafeConsole
from core.errors import StrataError, UsageError
from core.messages import Message
from core.vocabulary import SessionStatus
from memory.short_lease import unless_held_long

DEFAULT_CHAT_MODEL = "anthropic"
TIMELINE_ROWS = 30


@click.command()
@click.option("--model", "model_spec", metavar="M", help="anthropic:NAME (default) or script:PATH (offline).")
@click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
              help="Directory the tools may touch (a new session).")
@click.option("--resume", "resume_id", metavar="ID", default=None, help="Continue session ID.")
@click.option("--continue", "continue_latest", is_flag=True, help="Continue the latest session of this workspace.")
@click.option("--allow", multiple=True, metavar="RULE", help="Allow a tool without asking. Repeatable.")
@click.option("--deny", multiple=True, metavar="RULE", help="Deny a tool. Repeatable.")
@click.option("--max-turns", type=click.IntRange(min=1), default=None, help="Limit on model turns.")
@click.option("--without-project-hooks", is_flag=True,
              help="With --resume/--continue: continue without the project's hooks although the session started "
                   "with them trusted (recorded in the session as your choice).")
def chat(model_spec: str | None, workspace: Path, resume_id: str | None, continue_latest: bool,
         allow: tuple[str, ...], deny: tuple[str, ...], max_turns: int | None, without_project_hooks: bool) -> None:
    """Talk to an agent in this terminal; it asks before anything that writes, runs or reaches out."""
    from agent.terminal.approver import TerminalApprover  # the terminal (prompt_toolkit) loads only for chat
    from agent.terminal.chat import Chat, ChatView, CtrlC, make_prompt
    from agent.terminal.wakeup_fd import quiet_full_wakeup_fd

    if resume_id and continue_latest:
        raise click.UsageError("use --resume ID or --continue, not both")
    if without_project_hooks and not (resume_id or continue_latest):
        raise click.UsageError("--without-project-hooks continues a session: use it with --resume ID or --continue")
    cmd = Command()
    rules = cmd.rules(allow, deny)
    # NO_COLOR (no-color.org) here means plain text: no colours and no bold either. Whatever text reaches the
    # console is made inert (agent/terminal/safe_text.py).
    console = SafeConsole(highlight=False, color_system=None if os.environ.get("NO_COLOR") else "auto")
    view = ChatView(console)

    async def main() -> None:
        quiet_full_wakeup_fd()  # a resize storm printed a traceback a SIGWINCH over the chat
        if resume_id is not None:  # the session's own project config, as `strata resume` has it
            loaded = await cmd.session_config(session_id=resume_id, model=model_spec, max_turns=max_turns)
        else:  # --continue continues the latest session of this workspace: its project config is this one
            loaded = cmd.config(workspace, quiet=continue_latest, model=model_spec, max_turns=max_turns)
        settings = loaded.settings
        async with cmd.session_runtime(loaded) as rt:
            target = cmd.session_id if resume_id is not None else None
            if continue_latest:
                ws = str(await anyio.Path(workspace).resolve())
                records = [r for r in await rt.store.list_sessions() if r.workspace == ws]
                if not records:
                    raise UsageError(f"no session in workspace {ws} to continue",
                                     hint="start one with `strata chat`")
                target = records[-1].id
            record = await rt.store.get_session(target) if target is not None else None
            # The model first: a missing API key is one line before the terminal is taken over.
            model = model_from_spec(model_spec or (record.model if record else settings.model or DEFAULT_CHAT_MODEL))
            try:
                if not sys.stdin.isatty():  # after what would refuse anyway, before anything is recorded
                    if record is not None and not without_project_hooks:
                        await _refuse_resume_early(rt, record.id)
                    raise UsageError("strata chat needs a terminal on stdin; for a script or a pipe use "
                                     "`strata run PROMPT` (nothing was started)")
                view.max_attempts = getattr(getattr(model, "_retry", None), "max_attempts", None)
                keys = CtrlC()
                session = Chat(console, make_prompt(str(settings.home / "chat_history"), keys), view, keys=keys)
                asking = Asking(approver=TerminalApprover(console, session.ask_line, on_interrupt=session.interrupt,
                                                           quiet=view.area.paused))
                live: LiveSession
                if record is not None:
                    # As `strata resume` does: a lease held for a moment (`strata approve|deny` recording a decision, a
                    # reconcile, a probe) is waited for; one held longer is a running session, refused in one line
                    # naming its holder (SessionActive, exit 1). resume_session raises it before anything is recorded.
                    resumed = record.id
                    live = await unless_held_long(lambda: resume_session(
                        rt, resumed, rules=rules, model=model, max_turns=max_turns, observer=view, listener=view,
                        asking=asking, without_project_hooks=waiver(without_project_hooks, "chat")))
                    notices(loaded)
                    _replay(console, live)
                else:
                    live = await start_session(rt, model=model, workspace=workspace, mode="interactive", rules=rules,
                                               prompt=None, max_turns=settings.max_turns, observer=view, listener=view,
                                               asking=asking)
                session.commands = slash_commands(console, rt, live.id)
                session.untitled = record is None or not record.title
                try:
                    if live.state.open_batch is not None:
                        await session.turn(live, None)  # finish the batch a crash or an interrupt left open
                    await session.loop(live)
                finally:
                    await live.release(await _leaving_status(rt, live))
            finally:  # closed by the session's release already, unless it never started
                await close_model(model)

    cmd.run(main)
    sys.exit(0)


async def _leaving_status(rt: Runtime, live: LiveSession) -> SessionStatus:
    """The status a chat leaves its session in: `idle`, but `awaiting_approval` while its open batch still waits
    (its last run parked: a delegate call waiting on a child that another process drives, or that waits for a
    decision), as `strata resume` leaves it; `idle` would say nothing waits, and a later `strata resume ID PROMPT`
    would then run the prompt into a batch that parks again, unheard."""
    if live.loop.state.open_batch is None:
        return "idle"
    with anyio.CancelScope(shield=True):
        try:
            stored = (await rt.store.get_session(live.id)).status
        except StrataError:
            return "idle"
    return "awaiting_approval" if stored == "awaiting_approval" else "idle"


async def _refuse_resume_early(rt: Runtime, session_id: str) -> None:
    """The refusal a resume would give for missing project hooks, read without taking the session (so that it,
    not the missing terminal, is the one line a script sees)."""
    from agent.project_hooks import resume_refusal
    from memory.restore import restore_or_report

    state = (await restore_or_report(rt.store, session_id)).state
    if (refusal := resume_refusal(session_id, state.project_hooks_digest, rt.project_hooks)) is not None:
        raise refusal


def _replay(console: SafeConsole, live: LiveSession) -> None:
    """The conversation so far, so a resumed chat shows its history."""
    show_history(console, live.id, live.state.messages)


def show_history(console: SafeConsole, session_id: str, messages: Sequence[Message]) -> None:
    """A session's conversation, dimmed, one line a block (also `strata attach`'s, before it goes live)."""
    from agent.cli.render import _first_line

    console.print(f"[dim]history of session {session_id}:[/]", highlight=False)
    for message in messages:
        for block in message.content:
            if block.type == "text":
                console.print(f"[dim]{message.role}: {_first_line(block.text, 200)}[/]", markup=True,
                              highlight=False)
            elif block.type == "tool_use":
                console.print(f"[dim]  -> {block.name} {_first_line(str(block.input), 120)}[/]", highlight=False)
            elif block.type == "tool_result":
                mark = "error" if block.is_error else "ok"
                console.print(f"[dim]  <- {mark}: {_first_line(block.content, 120)}[/]", highlight=False)


def slash_commands(console: SafeConsole, rt: Runtime,
                   session_id: str) -> dict[str, Callable[[str], Awaitable[None]]]:
    """/timeline, /receipts, /show CALL_ID and /last: what happened in this session so far, masked like every
    observation surface (also `strata attach`'s, on a read-only runtime)."""

    async def timeline(_: str) -> None:
        rows = await rt.store.read_timeline(session_id)
        shown = [r for r in rows if r.kind in ("call", "approval", "model_attempt", "lifecycle")][-TIMELINE_ROWS:]
        console.print(f"timeline of {session_id}: {len(rows)} rows; the last {len(shown)} calls, approvals, model "
                      f"attempts and lifecycle rows (all: strata timeline {session_id})", highlight=False)
        for r in shown:
            decision = f" {r.decision}" if r.decision else ""
            console.print(f"  {r.seq:>5}  t{r.turn:<3} {r.kind:<13}{decision:<10} {r.summary[:140]}", markup=False,
                          highlight=False)

    async def receipts(_: str) -> None:
        rows = await rt.store.list_receipts(session_id)
        if not rows:
            console.print("no effect receipts in this session yet", highlight=False)
        for r in rows:
            by = f" (reconciled by {rt.masker.mask(r.reconciled_by)})" if r.reconciled_by else ""
            mask = rt.masker.mask
            console.print(f"  {r.id}  {r.status:<10} {mask(r.tool):<10} call {mask(r.call_id)}{by}", markup=False,
                          highlight=False)

    async def show(call_id: str) -> None:
        if not call_id:
            console.print("/show needs a call id (the dim id after each call); /last shows the last call's result",
                          highlight=False)
            return
        await show_call_result(console, rt, session_id, call_id)

    async def last(_: str) -> None:
        await show_call_result(console, rt, session_id, None)

    return {"/timeline": timeline, "/receipts": receipts, "/show": show, "/last": last}


async def show_call_result(console: SafeConsole, rt: Runtime, session_id: str, call_id: str | None) -> None:
    """A call's whole result (its blob, when the output was too large for the log), masked. `call_id` may be a
    unique start of the id; None: the last call of the session."""
    from core.events import CallResult

    found = [e.event for e in await rt.store.read_events(session_id) if isinstance(e.event, CallResult)]
    if call_id is not None:
        exact = [r for r in found if r.call_id == call_id]
        found = exact or [r for r in found if r.call_id.startswith(call_id)]
        if len({r.call_id for r in found}) > 1:
            ids = ", ".join(sorted({rt.masker.mask(r.call_id) for r in found}))
            console.print(f"{rt.masker.mask(call_id)} could be any of: {ids}", markup=False, highlight=False)
            return
    if not found:
        what = f"no call {rt.masker.mask(call_id)}" if call_id else "no call yet"
        console.print(f"{what} in this session", markup=False, highlight=False)
        return
    result = found[-1]
    text = result.content
    if result.blob is not None and (data := await rt.store.get_blob(result.blob.sha256)) is not None:
        text = data.decode("utf-8", errors="replace")
    reasons = "".join(f"\n{r}" for r in result.reasons)
    mask = rt.masker.mask
    console.print(f"result of {mask(result.call_id)} ({mask(result.tool)}, {result.status}, "
                  f"{len(text.encode('utf-8'))} bytes, whole):", markup=False, highlight=False)
    console.print(mask(text + reasons), markup=False, highlight=False, soft_wrap=True)
