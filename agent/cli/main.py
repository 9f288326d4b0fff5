"""`strata`: the command line. Exit codes: 0 completed, 1 error, 2 usage, 3 incomplete, 4 awaiting approval,
5 unknown effects pending, 6 a command left by a stopped process still runs (resume), 128 + N stopped by signal N
(130 Ctrl-C, 143 SIGTERM, 129 SIGHUP). User errors are one line plus a hint, never a traceback."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import click

from agent.cli import stdout
from agent.cli.output import echo, echo_json
from agent.cli.render import printer
from agent.cli.views import event_view, receipt_view, session_view, show_view
from agent.models import model_from_spec
from agent.outcome import EXIT_ERROR, RunOutcome
from agent.project_hooks import ProjectHooks
from agent.reconcile import ProbeOutcome, person, probe_receipts, reconcile
from agent.session import Asking, LiveSession, Runtime, resume_session, runtime, start_session
from config import LoadedConfig, Settings, load_config, load_settings
from config.seen_secrets import home_masker
from core.errors import ConfigError, Stopped, StrataError
from core.events import StoredEvent
from core.masking import Masker
from core.policy import PermissionRule, parse_rule
from core.state import Counters, FoldError
from core.tools import ToolSpec
from memory import restore
from memory.leases import make_liveness
from memory.records import RECEIPT_STATUSES, SessionRecord
from observability import attach_home, configure_logging

T = TypeVar("T")


def _fail(err: StrataError) -> NoReturn:
    # An error can quote what the user typed (a rule, a config value): masked like any other observation.
    masker = Masker.throwaway()
    prefix = "strata" if isinstance(err, Stopped) else "strata: error"  # a stop that was asked for is no error
    echo(f"{prefix}: {masker.mask(err.message)}", err=True)
    if err.hint:
        echo(f"hint: {masker.mask(err.hint)}", err=True)
    sys.exit(err.exit_code)


def _run(fn: Callable[[], Awaitable[T]]) -> T:
    try:
        return anyio.run(fn)
    except StrataError as err:
        _fail(err)
    except KeyboardInterrupt:
        echo("strata: interrupted", err=True)
        sys.exit(130)


def _settings(**flags: Any) -> Settings:
    try:
        return load_settings(**flags)
    except StrataError as err:
        _fail(err)


def _config(workspace: Path | None, *, quiet: bool = False, **flags: Any) -> LoadedConfig:
    """Effective config for a session in `workspace`; its notices (an untrusted project file) go to stderr, unless
    `quiet` (the caller says them with `_notices` once it knows the session goes on)."""
    try:
        loaded = load_config(workspace=workspace, flags=flags)
    except StrataError as err:
        _fail(err)
    if not quiet:
        _notices(loaded)
    return loaded


def _notices(loaded: LoadedConfig) -> None:
    for notice in loaded.notices:
        echo(f"strata: notice: {notice}", err=True)


def _apply_config(rt: Runtime, loaded: LoadedConfig) -> None:
    """Hooks and policy rules from config (user file, trusted project file) for the sessions `rt` drives."""
    rt.hooks = loaded.hook_set()
    rt.project_hooks = ProjectHooks.from_config(loaded)
    rt.config_rules = loaded.rules
    rt.repair_budget = loaded.settings.repair_budget
    rt.context_budget = loaded.settings.context_budget_tokens
    rt.snapshot_every = loaded.settings.snapshot_every
    extra = [*loaded.secrets.values, *(os.environ[n] for n in loaded.secrets.env if os.environ.get(n))]
    if extra:
        rt.masker = home_masker(loaded.settings.home, os.environ, extra_secrets=extra, read_only=rt.read_only)
        attach_home(loaded.settings.home, rt.masker, quiet=rt.read_only)  # logs masked with the configured secrets
    if rt.locks is not None:
        rt.locks.timeout_s = loaded.settings.lock_timeout_s
    rt.tools = _with_deadlines(rt.tools, loaded)


def _with_deadlines(tools: list[ToolSpec], loaded: LoadedConfig) -> list[ToolSpec]:
    """The tools with the deadlines config gives them (`[tools.NAME] timeout_s`); a name no tool has is an error
    naming its file, not a setting silently ignored."""
    names = {t.name for t in tools}
    for deadline in loaded.tool_timeouts:
        if deadline.tool not in names:
            raise ConfigError(f"no tool is named {deadline.tool!r} (tools: {', '.join(sorted(names))})",
                              file=deadline.source, key=f"tools.{deadline.tool}")
    given = {d.tool: d.timeout_s for d in loaded.tool_timeouts}
    return [dataclasses.replace(t, timeout_s=given[t.name]) if t.name in given else t for t in tools]


def _rules(allow: tuple[str, ...], deny: tuple[str, ...]) -> list[PermissionRule]:
    try:
        return [parse_rule("allow", r) for r in allow] + [parse_rule("deny", r) for r in deny]
    except StrataError as err:
        _fail(err)


def waiver(given: bool, command: str) -> str | None:
    """Who chose `--without-project-hooks`, as the session records it; None when the flag was not given."""
    return person(f"strata {command} --without-project-hooks") if given else None


def _display_status(rt: Runtime, rec: SessionRecord) -> str:
    if rec.status == "active" and (rec.lease is None or not make_liveness(rt.clock)(rec.lease)):
        return "interrupted"
    return rec.status


def _emit_json(obj: dict[str, Any]) -> None:
    echo_json(obj)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--verbose", is_flag=True, help="Log what the runtime does to stderr.")
def cli(verbose: bool) -> None:
    """Strata: an event-sourced agent runtime. A model proposes tool calls; Strata decides, durably and
    auditably, what actually runs."""
    configure_logging(verbose)


def _observer(as_json: bool) -> Callable[[StoredEvent], None]:
    if as_json:
        return lambda item: _emit_json(event_view(item))
    return printer(echo)


async def _drive(live: LiveSession, prompt: str | None, as_json: bool) -> RunOutcome:
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
    if as_json:
        _emit_json({"type": "result", "session_id": outcome.session_id, "status": outcome.status,
                    "reason": outcome.reason, "unknown_receipts": outcome.unknown_receipts,
                    "exit_code": outcome.exit_code, "parked": parked})
    else:
        if outcome.status == "failed":
            echo(f"strata: error: {outcome.reason}", err=True)
        for p in parked:
            echo(f"waiting for approval: {p['tool']} {json.dumps(p['input'], ensure_ascii=False)} "
                       f"(asked by {p['asked_by']})")
            echo(f"  approve: strata approve {outcome.session_id} {p['call_id']}    "
                       f"deny: strata deny {outcome.session_id} {p['call_id']} --reason TEXT")
        if outcome.unknown_receipts:
            echo(f"{outcome.unknown_receipts} effect(s) with unknown outcome await reconciliation: "
                       f"strata receipts {outcome.session_id} --status unknown")
        echo(f"inspect: strata show {outcome.session_id}    resume: strata resume {outcome.session_id} PROMPT")
    return outcome


_allow = click.option("--allow", multiple=True, metavar="RULE",
                      help="Allow a tool, optionally with a pattern: bash, 'bash(git status*)'. Repeatable.")
_deny = click.option("--deny", multiple=True, metavar="RULE", help="Deny a tool (beats allow). Repeatable.")
_json = click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
_without_project_hooks = click.option(
    "--without-project-hooks", is_flag=True,
    help="Continue a session without its project's hooks although it started with them trusted (recorded in the "
         "session as your choice); otherwise such a resume is refused until the project is trusted again.")
_on_ask = click.option("--on-ask", type=click.Choice(["deny", "park"]), default=None,
                       help="What `ask` means with no person at the terminal: deny the call (default), or park the "
                            "session (exit 4) until `strata approve` / `strata deny`.")


@cli.command()
@click.option("--model", "model_spec", metavar="M", help="script:PATH (offline) or anthropic:NAME.")
@click.option("--workspace", type=click.Path(path_type=Path), default=".", show_default=True,
              help="Directory the tools may touch.")
@_allow
@_deny
@click.option("--max-turns", type=int, default=None, help="Stop as incomplete after this many model turns.")
@_on_ask
@_json
@click.argument("prompt")
def run(model_spec: str | None, workspace: Path, allow: tuple[str, ...], deny: tuple[str, ...],
        max_turns: int | None, on_ask: str | None, as_json: bool, prompt: str) -> None:
    """Run a headless session on PROMPT."""
    loaded = _config(workspace, model=model_spec, max_turns=max_turns, on_ask=on_ask)
    settings = loaded.settings
    rules = _rules(allow, deny)

    async def main() -> RunOutcome:
        model = model_from_spec(settings.model)
        async with runtime(settings) as rt:
            _apply_config(rt, loaded)
            live = await start_session(rt, model=model, workspace=workspace, mode="headless", rules=rules,
                                       prompt=prompt, max_turns=settings.max_turns, observer=_observer(as_json),
                                       asking=Asking(on_ask=settings.on_ask))
            return await _drive(live, None, as_json)

    sys.exit(_run(main).exit_code)


@cli.command()
@click.argument("session_id")
@click.argument("prompt", required=False)
@click.option("--model", "model_spec", metavar="M", help="Override the session's recorded model.")
@_allow
@_deny
@click.option("--max-turns", type=click.IntRange(min=1), default=None,
              help="A new limit on the session's total model turns (to continue an incomplete session).")
@_on_ask
@_without_project_hooks
@click.option("--kill-orphans", is_flag=True,
              help="If a command of the open batch still runs although the process that started it was killed, "
                   "kill its process group (by default resume waits for it up to the lock timeout, then exits 6).")
@_json
def resume(session_id: str, prompt: str | None, model_spec: str | None, allow: tuple[str, ...],
           deny: tuple[str, ...], max_turns: int | None, on_ask: str | None, without_project_hooks: bool,
           kill_orphans: bool, as_json: bool) -> None:
    """Resume session SESSION_ID by id, optionally with a new PROMPT."""
    settings = _settings()
    rules = _rules(allow, deny)

    async def main() -> RunOutcome:
        async with runtime(settings) as rt:
            record = await rt.store.get_session(session_id)
            loaded = _config(Path(record.workspace), quiet=True, on_ask=on_ask)
            _apply_config(rt, loaded)
            model = model_from_spec(model_spec) if model_spec else None
            live = await resume_session(rt, session_id, model=model, model_factory=model_from_spec, rules=rules,
                                        max_turns=max_turns, observer=_observer(as_json),
                                        asking=Asking(on_ask=on_ask),  # type: ignore[arg-type]  # None: the session's
                                        prompt=prompt, without_project_hooks=waiver(without_project_hooks, "resume"),
                                        kill_orphans=kill_orphans)
            _notices(loaded)  # once the resume goes on (a refusal says everything in its own line)
            return await _drive(live, prompt, as_json)

    sys.exit(_run(main).exit_code)


@cli.command()
@_json
def sessions(as_json: bool) -> None:
    """List sessions, oldest first."""
    from core.errors import DamagedEvent

    settings = _settings()

    async def main() -> None:
        async with runtime(settings, read_only=True) as rt:
            records = await rt.store.list_sessions()
            unknown: dict[str, int] = {}
            for r in await rt.store.list_receipts(status="unknown"):
                unknown[r.session_id] = unknown.get(r.session_id, 0) + 1
            views = []
            for r in records:
                try:  # the counters come from the folded state: one snapshot plus a short tail per session
                    counters: Counters | None = (await restore(rt.store, r.id)).state.counters
                except (FoldError, DamagedEvent):  # a broken log is listed with unknown counters ('?')
                    counters = None
                views.append(session_view(r, _display_status(rt, r), rt.masker, unknown.get(r.id, 0), counters))
        if as_json:
            for v in views:
                _emit_json(v)
            return
        if not views:
            echo("no sessions yet")
            return
        echo(f"{'id':<36}  {'status':<17} {'mode':<11} {'turns':>5} {'calls':>5} {'denied':>6} "
                   f"{'unknown':>7}  {'updated (UTC)':<19}  title")
        for v in views:
            def n(key: str, view: dict[str, Any] = v) -> str:
                return "?" if view[key] is None else str(view[key])
            echo(f"{v['id']:<36}  {v['status']:<17} {v['mode']:<11} {n('turns'):>5} {n('tool_calls'):>5} "
                       f"{n('denials'):>6} {v['unknown_receipts']:>7}  {v['updated_at'][:19]:<19}  {v['title'][:40]}")

    _run(main)


@cli.command()
@click.argument("session_id")
@_json
def show(session_id: str, as_json: bool) -> None:
    """Show a session and its conversation as the next model request would carry it."""
    from memory.restore import restore_or_report

    settings = _settings()

    async def main() -> None:
        async with runtime(settings, read_only=True) as rt:
            rec = await rt.store.get_session(session_id)
            state = (await restore_or_report(rt.store, session_id)).state
            view = show_view(rec, _display_status(rt, rec), state, rt.masker)
        if as_json:
            _emit_json(view)
            return
        s = view["session"]
        echo(f"session {s['id']}  {s['status']}  mode {s['mode']}  model {s['model']}")
        echo(f"workspace {s['workspace']}")
        echo(f"turns {s['turns']}  tool calls {s['tool_calls']}  denials {s['denials']}  "
                   f"unknown outcomes {s['unknown_outcomes']}")
        for m in view["messages"]:
            for block in m["content"]:
                if block["type"] == "text":
                    echo(f"{m['role']}: {block['text']}")
                elif block["type"] == "tool_use":
                    echo(f"{m['role']}: -> {block['name']} {json.dumps(block['input'])[:100]} [{block['id']}]")
                else:
                    first = block["content"].strip().splitlines()[0] if block["content"].strip() else ""
                    mark = "error" if block["is_error"] else "ok"
                    echo(f"{m['role']}: <- [{block['tool_use_id']}] {mark}: {first[:100]}")
        if view["open_batch"]:
            echo(f"open batch {view['open_batch']['batch_id']}: resume the session to finish it")

    _run(main)


@cli.command()
@click.argument("session_id", required=False)
@click.option("--status", type=click.Choice(RECEIPT_STATUSES), default=None)
@_json
def receipts(session_id: str | None, status: str | None, as_json: bool) -> None:
    """List effect receipts (of one session, or all)."""
    settings = _settings()

    async def main() -> None:
        async with runtime(settings, read_only=True) as rt:
            if session_id is not None:
                await rt.store.get_session(session_id)
            rows = await rt.store.list_receipts(session_id, status)  # type: ignore[arg-type]
            views = [receipt_view(r, rt.masker) for r in rows]
        if as_json:
            for v in views:
                _emit_json(v)
            return
        if not views:
            echo("no receipts")
        for v in views:
            extra = f"  ({v['reconciled_by']}: {v['note']})" if v["reconciled_by"] else ""
            echo(f"{v['id']}  {v['status']:<10} {v['tool']:<10} call {v['call_id']}  session {v['session_id']}"
                       f"{extra}")

    _run(main)


@cli.command(name="reconcile")
@click.argument("target", required=False)
@click.option("--applied", is_flag=True, help="The effect happened.")
@click.option("--not-applied", is_flag=True, help="The effect did not happen.")
@click.option("--note", default=None, help="Why you decided so.")
@click.option("--probe", is_flag=True, help="Let each tool's probe decide unknown receipts (of session TARGET, or "
                                             "all sessions).")
def reconcile_cmd(target: str | None, applied: bool, not_applied: bool, note: str | None, probe: bool) -> None:
    """Decide the outcome of an unknown effect: `reconcile RECEIPT --applied|--not-applied`, or
    `reconcile --probe [SESSION]`. The call is never re-run."""
    if applied and not_applied:  # a decision recorded for good: two contradicting ones are refused, not resolved
        raise click.UsageError("--applied and --not-applied contradict each other; give one")
    verdict = "applied" if applied else "not_applied" if not_applied else None
    if probe:
        if verdict is not None:
            raise click.UsageError("--probe decides by itself; leave out --applied / --not-applied")
        _reconcile_by_probe(target)
        return
    if target is None:
        raise click.UsageError("name the receipt to reconcile (see `strata receipts --status unknown`), or use --probe")
    if verdict is None:
        raise click.UsageError("say what happened: --applied or --not-applied")
    settings = _settings()

    async def main() -> None:
        async with runtime(settings) as rt:
            before, after = await reconcile(rt.store, rt.clock, target, applied=verdict == "applied", note=note,
                                            by=person())
        echo(f"receipt {after.id} ({after.tool}, call {after.call_id}): {before.status} -> {after.status}")
        echo(f"the model hears of it when the session resumes: strata resume {after.session_id}")

    _run(main)


def _reconcile_by_probe(session_id: str | None) -> None:
    settings = _settings()

    async def main() -> list[ProbeOutcome]:
        async with runtime(settings) as rt:
            if session_id is not None:
                await rt.store.get_session(session_id)
            return await probe_receipts(rt.store, rt.clock, rt.tools, session_id)

    outcomes = _run(main)
    if not outcomes:
        echo("no unknown receipts to probe")
    for o in outcomes:
        r = o.receipt
        if o.after is not None:
            echo(f"receipt {r.id} ({r.tool}, call {r.call_id}): {r.status} -> {o.after.status} "
                       f"({o.verdict.replace('_', ' ')}: {o.note})")
        else:
            echo(f"receipt {r.id} ({r.tool}, call {r.call_id}): {o.verdict}: {o.note}")
    for sid in sorted({o.receipt.session_id for o in outcomes if o.after is not None}):
        echo(f"the model hears of it when the session resumes: strata resume {sid}")


@cli.command()
@click.option("--workspace", type=click.Path(path_type=Path), default=".", show_default=True,
              help="Whose project config to check.")
def doctor(workspace: Path) -> None:
    """Check that Strata can work here: Python, config, home, database, masking key, model, bash, terminal."""
    from agent.doctor import report, run_checks

    sys.exit(report(run_checks(workspace), echo))


@cli.command()
def demo() -> None:
    """Run the offline demo: a scripted session that is killed mid-batch and resumed by id."""
    from agent.demo import run_demo

    try:
        code = run_demo(echo)
    except StrataError as err:
        _fail(err)
    sys.exit(code)


def main() -> None:
    stdout.install()  # a failed write to stdout is reported once, at the end (agent/cli/stdout.py)
    code: int | str | None
    try:
        cli.main(prog_name="strata", standalone_mode=True)
        code = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a bug, not a user error: say so plainly, keep the detail for a report
        echo(f"strata: internal error: {type(exc).__name__}: {Masker.throwaway().mask(str(exc))}", err=True)
        echo("hint: rerun with --verbose and report it with the command you ran", err=True)
        code = EXIT_ERROR
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): Python prints it and exits 1
        echo(code, err=True)
        code = EXIT_ERROR
    sys.exit(stdout.finish(code, lambda line: echo(line, err=True)))


from agent.cli.config_cmds import config_group, trust  # noqa: E402  (registered last, after the group exists)

cli.add_command(trust)
cli.add_command(config_group)

from agent.cli.approval_cmds import approve, deny  # noqa: E402

cli.add_command(approve)
cli.add_command(deny)

from agent.cli.timeline_cmd import timeline  # noqa: E402

cli.add_command(timeline)

from agent.cli.chat_cmd import chat  # noqa: E402

cli.add_command(chat)

from agent.cli.export_cmd import export  # noqa: E402
from agent.cli.fork_cmd import fork  # noqa: E402

cli.add_command(export)
cli.add_command(fork)
import agent.cli.knowledge_cmd  # noqa: E402, F401  (adds `strata knowledge`)
