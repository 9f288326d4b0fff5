"""`strata export ID --format jsonl|html|otlp [--output FILE]`: a session for people and tools that were not
there. Everything written is masked with the runtime's masker (configured secrets included). How `--output` is
written (atomically, in place, through a symlink) is agent/cli/output_file.py's business."""

from __future__ import annotations

from pathlib import Path

import click

from agent.cli._common import Command
from agent.cli.output import echo, echo_document
from agent.cli.output_file import refuse_home_file, write_output
from core.errors import StrataError
from core.masking import Masker
from observability.export import RENDERERS, ExportFormat, SessionSnapshot, load_snapshot


@click.command(name="export")
@click.argument("session_ref", metavar="SESSION_ID")
@click.option("--format", "fmt", type=click.Choice(list(RENDERERS)), default="jsonl", show_default=True,
              help="jsonl: the session header, state events, timeline rows and receipts, one object per line. "
                   "html: one self-contained page with a waterfall. otlp: an OTLP/JSON trace (GenAI conventions).")
@click.option("--output", "-o", metavar="FILE", default=None,
              help="Where to write ('-' for stdout). Default: stdout for jsonl and otlp, strata-ID.html in the "
                   "current directory for html.")
def export(session_ref: str, fmt: ExportFormat, output: str | None) -> None:
    """Export session SESSION_ID, masked, as JSONL, HTML or OTLP JSON."""
    if output is not None and not output.strip():  # Path("") is the cwd: the export would be renamed onto it
        raise click.BadParameter("is empty; name a file, or '-' for stdout", param_hint="--output")
    cmd = Command()

    async def main() -> tuple[SessionSnapshot, Masker, Path]:
        # Secrets named in the session's config (its project's too) are masked, as they were when it ran.
        loaded = await cmd.session_config(session_id=session_ref, quiet=False)
        async with cmd.reader(loaded) as rt:
            return await load_snapshot(rt.store, cmd.session_id), rt.masker, loaded.settings.home

    snapshot, masker, home = cmd.run(main)
    text = RENDERERS[fmt](snapshot, masker)
    if output == "-" or (output is None and fmt != "html"):
        echo_document(text)
        return
    path = Path(output) if output is not None else Path.cwd() / f"strata-{cmd.session_id}.html"
    try:
        refuse_home_file(path, home)
        written = write_output(path, text)
    except StrataError as err:
        cmd.fail(err)
    if written.made_file:
        echo(str(written.path.resolve()))
