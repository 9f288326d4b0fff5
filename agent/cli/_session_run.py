"""What `strata run PROMPT` and `strata resume ID [PROMPT]` do once their arguments are parsed (agent/cli/
session_cmds.py declares them): drive a session headless to its end, print its events (or one JSON object per
committed event) and a final result, and exit with the outcome's code."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import structlog

from agent.cli._common import Command, notices, waiver
from agent.cli.interrupted import interrupted_hints
from agent.cli.output import echo, echo_json, say_error
from agent.cli.render import Tally, printer
from agent.default_model import DEFAULT_MODEL_SPEC
from agent.models import close_model, model_from_spec
from agent.outcome import RunOutcome
from agent.session import Asking, LiveSession, Runtime, refuse_empty_prompt, resume_session, start_session
from core.errors import StrataError
from core.events import StoredEvent
from memory.short_lease import WAITING_FOR_LEASE, unless_held_long


def _observer(as_json: bool, tally: Tally) -> Callable[[StoredEvent], None]:
    if as_json:
        from agent.cli.views import event_view  # the JSON views (and the session list's) only for --json

        show: Callable[[StoredEvent], None] = lambda item: echo_json(event_view(item))  # noqa: E731
    else:
        show = printer(echo)
    # Bound once, after logging is configured for this command: the module's lazy logger binds anew on every
    # call, and a run commits a few events per turn. Its level is fixed at configuration, so a debug line
    # nobody shows costs a no-op call.
    log = _log.bind()
    verbose = log.is_enabled_for(logging.DEBUG)

    def observe(item: StoredEvent) -> None:
        tally.observe(item)
        if verbose:
            ev = item.event
            # what --verbose shows: Strata's own events as they are committed (the log file keeps them too)
            about = {k: v for k in ("call_id", "tool", "status") if (v := getattr(ev, k, None)) is not None}
            log.debug("event committed", seq=item.seq, turn=item.turn, kind=ev.kind, **about)
        show(item)

    return observe


_log = structlog.get_logger("strata.session")


def _effectful(rt: Runtime) -> set[str]:
    return {t.name for t in rt.tools if t.effect == "effectful"}


async def _drive(live: LiveSession, prompt: str | None, as_json: bool, tally: Tally) -> RunOutcome:
    try:
        outcome = await live.run(prompt)
    except BaseException:
        with contextlib.suppress(StrataError):
            await live.release(None)
        raise
    await live.release(None)
    parked = [{"call_id": p.call_id, "tool": p.tool, "input": p.input, "reasons": list(p.reasons),
               "asked_by": p.asked_by} for p in live.state.parked.values()
              if p.call_id not in live.state.approvals] if outcome.status == "awaiting_approval" else []
    sid = outcome.session_id
    if as_json:
        echo_json({"type": "result", "session_id": sid, "status": outcome.status,
                   "reason": outcome.reason, "unknown_receipts": outcome.unknown_receipts,
                   "exit_code": outcome.exit_code, "parked": parked,
                   "effects_all_denied": tally.summary() is not None})
    else:
        if outcome.status == "failed":
            say_error(outcome.reason)
        if (denied := tally.summary()) is not None:
            echo(denied)
        for p in parked:
            echo(f"waiting for approval: {p['tool']} {json.dumps(p['input'], ensure_ascii=False)} "
                 f"(asked by {p['asked_by']})")
            echo(f"  approve: strata approve {sid} {p['call_id']}    "
                 f"deny: strata deny {sid} {p['call_id']} --reason TEXT")
        if outcome.unknown_receipts:
            echo(f"{outcome.unknown_receipts} effect(s) with unknown outcome await reconciliation: "
                 f"strata receipts {sid} --status unknown")
        if parked:  # a prompt would not run before the parked calls are decided: no such suggestion now
            if len(parked) > 1:
                echo(f"  all at once: strata approve {sid} --all    or: strata deny {sid} --all --reason TEXT")
            echo(f"inspect: strata show {sid}    once every call is decided: strata resume {sid}")
        elif outcome.status == "awaiting_approval":  # a dispatched call's work waits elsewhere (a parked child)
            echo(f"waiting: {outcome.reason}")
            echo(f"inspect: strata show {sid}")
        else:
            echo(f"inspect: strata show {sid}    resume: strata resume {sid} PROMPT")
    return outcome


def run_session(model_spec: str | None, workspace: Path, allow: tuple[str, ...], deny: tuple[str, ...],
                max_turns: int | None, on_ask: str | None, as_json: bool, prompt: str) -> None:
    """`strata run` (agent/cli/session_cmds.py `run`)."""
    cmd = Command()
    loaded = cmd.config(workspace, model=model_spec, max_turns=max_turns, on_ask=on_ask)
    settings = loaded.settings
    rules = cmd.rules(allow, deny)

    async def main() -> RunOutcome:
        refuse_empty_prompt(prompt)  # before the model is made (an API model's SDK import: ~1 s of CPU)
        model = model_from_spec(settings.model or DEFAULT_MODEL_SPEC)  # the one chat uses too
        try:
            async with cmd.session_runtime(loaded) as rt:
                tally = Tally(_effectful(rt))
                live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=rules,
                                           prompt=prompt, max_turns=settings.max_turns,
                                           observer=_observer(as_json, tally), asking=Asking(on_ask=settings.on_ask))
                cmd.session_id, cmd.took_session = live.id, True
                return await _drive(live, None, as_json, tally)
        finally:  # closed by the session's release already, unless the start failed
            await close_model(model)

    sys.exit(cmd.run(main, on_interrupt=interrupted_hints(cmd)).exit_code)


def resume_session_cmd(session_id: str, prompt: str | None, model_spec: str | None, allow: tuple[str, ...],
                       deny: tuple[str, ...], max_turns: int | None, on_ask: str | None, without_project_hooks: bool,
                       kill_orphans: bool, as_json: bool) -> None:
    """`strata resume` (agent/cli/session_cmds.py `resume`)."""
    cmd = Command()
    rules = cmd.rules(allow, deny)

    def took() -> None:
        cmd.took_session = True

    async def main() -> RunOutcome:
        loaded = await cmd.session_config(session_id=session_id, on_ask=on_ask)
        async with cmd.session_runtime(loaded) as rt:
            model = model_from_spec(model_spec) if model_spec else None
            try:
                tally = Tally(_effectful(rt))
                # A lease held for a moment (`strata approve|deny` recording a decision, a reconcile, a probe) is
                # waited for, as those wait for each other; one held longer is a running session (SessionActive,
                # its holder named). resume_session raises it before anything is recorded. The wait is logged (the
                # log file says what the pause was).
                live = await unless_held_long(lambda: resume_session(
                    rt, cmd.session_id, model=model, model_factory=model_from_spec, rules=rules,
                    max_turns=max_turns, observer=_observer(as_json, tally),
                    asking=Asking(on_ask=on_ask),  # type: ignore[arg-type]  # None: the session's
                    prompt=prompt, without_project_hooks=waiver(without_project_hooks, "resume"),
                    kill_orphans=kill_orphans, leased=took), waiting=lambda exc: _log.info(
                    WAITING_FOR_LEASE, session_id=cmd.session_id, owner=exc.owner))
                notices(loaded)  # once the resume goes on (a refusal says everything in its own line)
                return await _drive(live, prompt, as_json, tally)
            finally:  # one made from the session's record is the session's, closed by its release
                if model is not None:
                    await close_model(model)

    sys.exit(cmd.run(main, on_interrupt=interrupted_hints(cmd)).exit_code)
