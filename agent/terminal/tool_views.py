"""How calls look on the chat screen: a call's main argument (for the status line), its result as a short block
(the first lines, then how many more and the full size, with the command that prints it all), and the arguments
of an approval as a person reads them: `write_file` content as text, `edit_file` as a coloured unified diff, a
`bash` command as a command, every other argument in full. Nothing is cut silently: long lines fold, and a
result's hidden lines are counted and named."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text

from agent.terminal.safe_text import safe_text
from core.events import CallResult

PREVIEW_LINES = 6
"""A result's lines shown on the chat screen; `/show CALL_ID` prints all of them."""
_MAIN_ARGS = ("command", "path", "pattern", "url", "query", "name")
_MARK = {"ok": "[green]ok[/]", "error": "[red]error[/]", "denied": "[red]DENIED[/]", "timeout": "[red]TIMEOUT[/]",
         "unknown": "[magenta]UNKNOWN[/]"}


def main_argument(arguments: Mapping[str, Any], limit: int = 60) -> str:
    """The argument that says what a call does (its command, path, pattern...), on one line."""
    value: object = next((arguments[k] for k in _MAIN_ARGS if isinstance(arguments.get(k), str)), None)
    if value is None:
        value = next((v for v in arguments.values() if isinstance(v, str)), "")
    line = " ".join(str(value).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes" if n != 1 else "1 byte"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024 / 1024:.1f} MiB"


def show_result(c: Console, ev: CallResult) -> None:
    """A call's result: one line when it is short, else its first lines and what is left out."""
    mark = _MARK.get(ev.status, escape(ev.status))
    check = f" by {escape(ev.check)}" if ev.status == "denied" and ev.check else ""
    body = "\n".join(ev.reasons) if ev.status == "denied" and ev.reasons else ev.content
    head = f"  [bold]<-[/] {escape(ev.tool)} {mark}{check}"
    lines = body.rstrip().splitlines()
    if len(lines) <= 1 and len(body) <= 120:
        c.print(f"{head}: {escape(safe_text(body.strip()))}" if body.strip() else head, highlight=False)
        return
    total = ev.blob.size if ev.blob is not None else len(body.encode("utf-8"))
    timing = f", {ev.duration_ms / 1000:.1f} s" if ev.duration_ms is not None else ""
    # With a blob, `content` is only the excerpt the model sees: its lines are not the output's, so none are
    # counted (the whole output's size is known; its line count is not without reading the blob).
    count = f"{len(lines)} line{'s' if len(lines) != 1 else ''}, " if ev.blob is None else ""
    c.print(f"{head} [dim]({count}{size(total)}{timing})[/]", highlight=False)
    room = max(20, c.width - 7)
    for line in lines[:PREVIEW_LINES]:
        c.print(Text("     │ ", style="dim") + Text(safe_text(line)), no_wrap=True, overflow="ellipsis",
                highlight=False)
    hidden = len(lines) - PREVIEW_LINES
    cropped = any(len(line) > room for line in lines[:PREVIEW_LINES])
    if hidden > 0 or ev.blob is not None or cropped:
        more = ("more" if ev.blob is not None else f"{hidden} more lines" if hidden > 0
                else "long lines are cropped here")
        whole = " (the whole output is kept as a blob)" if ev.blob is not None else ""
        c.print(f"     [dim]… {more}, {size(total)} in all{whole}: /show {escape(ev.call_id)}[/]", highlight=False)


def _folded(c: Console, prefix: Text, lines: Iterable[tuple[str, str]]) -> None:
    """Each (line, style) after `prefix`, folded at the screen's edge beside it: a long line stays inside its
    block (a line with no space was pushed below the prefix, to the left edge, leaving an empty-looking line
    behind), and is measured as shown (control characters as their visible escapes). Printed as one text: a
    print per line (a table each) took ~0.3 ms, a minute for a 200,000-line argument."""
    indent = Text(" " * prefix.cell_len)
    room = max(1, c.width - prefix.cell_len)
    out = Text()
    for line, style in lines:
        for i, piece in enumerate(Text(safe_text(line), style=style).wrap(c, room, overflow="fold") or [Text()]):
            out.append_text(prefix if i == 0 else indent)
            out.append_text(piece)
            out.append("\n")
    c.print(out, highlight=False, no_wrap=True, overflow="ignore", crop=False, end="")


def _text_block(c: Console, text: str) -> None:
    """A text argument as it is, every line, folded at the screen's edge (never cut)."""
    _folded(c, Text("    │ ", style="dim"), ((line, "") for line in text.splitlines() or [""]))
    if text and not text.endswith("\n"):
        c.print("    [dim](no newline at the end)[/]", highlight=False)


def _diff(c: Console, path: str, old: str, new: str) -> None:
    """old -> new as a unified diff whose context is all of both: every line of each argument is on screen."""
    before, after = old.splitlines(), new.splitlines()
    diff = difflib.unified_diff(before, after, f"{path} (old)", f"{path} (new)", lineterm="",
                                n=max(len(before), len(after)))
    _folded(c, Text("    "), ((line, "bold" if line.startswith(("---", "+++")) else "green" if line.startswith("+")
                              else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else "")
                             for line in diff))


def _value(c: Console, key: str, value: object) -> None:
    if isinstance(value, str) and "\n" not in value:
        c.print(Text(f"  {key}: ") + Text(safe_text(value)), overflow="fold", highlight=False)
    elif isinstance(value, str):
        c.print(f"  {escape(key)} ({len(value.splitlines())} lines, {size(len(value.encode('utf-8')))}):",
                highlight=False)
        _text_block(c, value)
    else:
        c.print(Text(f"  {key}: ") + Text(json.dumps(value, ensure_ascii=False, sort_keys=True)), overflow="fold",
                highlight=False)


def show_arguments(c: Console, tool: str, arguments: Mapping[str, Any]) -> None:
    """Every argument of a call, in full, in the form that reads best for the tool."""
    rest = dict(arguments)
    if tool == "bash" and isinstance(rest.get("command"), str):
        c.print("  command:", highlight=False)
        c.print(Padding(Syntax(safe_text(rest.pop("command")), "bash", theme="monokai", word_wrap=True,
                               background_color="default"), (0, 0, 0, 4)))
    elif tool == "edit_file" and all(isinstance(rest.get(k), str) for k in ("path", "old", "new")):
        path, old, new = rest.pop("path"), rest.pop("old"), rest.pop("new")
        c.print(Text("  path: ") + Text(safe_text(path)), overflow="fold", highlight=False)
        c.print("  change (old -> new, every line of both):", highlight=False)
        _diff(c, path, old, new)
    elif tool == "write_file" and isinstance(rest.get("content"), str):
        content = rest.pop("content")
        for key in sorted(rest):
            _value(c, key, rest[key])
        rest = {}
        lines = len(content.splitlines())
        c.print(f"  content ({lines} line{'s' if lines != 1 else ''}, {size(len(content.encode('utf-8')))}):",
                highlight=False)
        _text_block(c, content)
    for key in sorted(rest):
        _value(c, key, rest[key])
