"""`strata reconcile RECEIPT --applied|--not-applied` and `strata reconcile --probe [ID]`: decide the outcome of an
uncertain effect, by a person or by each tool's probe (agent/reconcile.py). The call is never re-run."""

from __future__ import annotations

from typing import NoReturn

import anyio
import click

from agent.awaiting_receipts import awaiting_decision, awaiting_hint
from agent.cli._common import Command
from agent.cli.output import echo
from agent.cli.views import receipt_reads
from agent.reconcile import ProbeOutcome, person, probe_receipts, reconcile
from core.clock import SystemClock
from core.errors import UsageError
from memory.liveness import make_liveness
from memory.opening import open_store
from memory.rows import Receipt


@click.command(name="reconcile")
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
        _name_the_receipt()
    if verdict is None:
        raise click.UsageError("say what happened: --applied or --not-applied")
    cmd = Command()

    async def main() -> tuple[Receipt, Receipt]:
        loaded = await cmd.session_config(receipt_id=target)
        assert cmd.receipt is not None
        async with cmd.runtime(loaded) as rt:
            return await reconcile(rt, cmd.receipt.id, applied=verdict == "applied", note=note, by=person())

    before, after = cmd.run(main)
    echo(f"receipt {after.id} ({after.tool}, call {after.call_id}): {receipt_reads(before)} -> "
         f"{receipt_reads(after)}")
    echo(f"the model hears of it when the session resumes: strata resume {after.session_id}")


def _name_the_receipt() -> NoReturn:
    """No receipt named: a usage error whose hint names the receipts awaiting a decision (agent/awaiting_receipts.py:
    `unknown`, and `dispatched` whose session's process is gone; not a call a running session has in flight)."""
    cmd = Command()
    loaded = cmd.config(None, quiet=True)

    async def main() -> list[Receipt]:
        store = await open_store(loaded.settings, read_only=True)
        try:
            return await awaiting_decision(store, make_liveness(SystemClock()))
        finally:
            with anyio.CancelScope(shield=True):
                await store.close()

    awaiting = cmd.run(main)
    cmd.fail(UsageError("name the receipt to reconcile (its id or its call's id) with --applied or --not-applied, "
                        "or use --probe", hint=awaiting_hint(awaiting)))


def _reconcile_by_probe(session_id: str | None) -> None:
    cmd = Command()

    async def main() -> list[ProbeOutcome]:
        if session_id is None:
            loaded = cmd.config(None, quiet=True)
        else:
            loaded = await cmd.session_config(session_id=session_id)
        async with cmd.runtime(loaded) as rt:
            return await probe_receipts(rt, rt.tools, cmd.session_id or None)

    outcomes = cmd.run(main)
    if not outcomes:
        echo("no unknown receipts to probe")
    for o in outcomes:
        r = o.receipt
        if o.after is not None:
            echo(f"receipt {r.id} ({r.tool}, call {r.call_id}): {receipt_reads(r)} -> {receipt_reads(o.after)} "
                 f"({o.verdict.replace('_', ' ')}: {o.note})")
        else:
            echo(f"receipt {r.id} ({r.tool}, call {r.call_id}): {o.verdict}: {o.note}")
    for sid in sorted({o.receipt.session_id for o in outcomes if o.after is not None}):
        echo(f"the model hears of it when the session resumes: strata resume {sid}")
