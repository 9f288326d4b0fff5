"""`strata reconcile RECEIPT --applied|--not-applied` and `strata reconcile --probe [ID]`: decide the outcome of an
uncertain effect, by a person or by each tool's probe (agent/reconcile.py). The call is never re-run."""

from __future__ import annotations

import click

from agent.cli._common import Command
from agent.cli.output import echo
from agent.cli.views import receipt_reads
from agent.reconcile import ProbeOutcome, person, probe_receipts, reconcile
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
        raise click.UsageError("name the receipt to reconcile (see `strata receipts --status unknown`), or use --probe")
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
