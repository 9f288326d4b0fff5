"""Text shown on a terminal is inert: one sanitiser for every terminal surface.

Model text, tool output, file contents, configuration values and error messages may carry terminal control
sequences: OSC (`ESC ]`, e.g. OSC 52 writes the clipboard, OSC 8 hides a link), DCS, APC, PM and SOS strings,
cursor movement that overwrites what was shown (an approval prompt, a denial), and the same as 8-bit C1 controls.
Strata writes only the sequences it produces itself (rich's colours, prompt_toolkit's line editing), never one it
did not:

- ANSI CSI sequences (`ESC [ ... final`, or the C1 CSI) are dropped: they are formatting (colours from `ls
  --color`, progress bars) or cursor movement, and dropping them keeps the text around them readable;
- every other control character (C0 but newline and tab, DEL, C1) is shown as a visible escape such as `\\x1b`,
  so an OSC, DCS, APC, PM or SOS string appears as inert text: nothing of it is eaten, nothing reaches the
  terminal as a command. A carriage return before a newline is dropped (Windows line ends), any other is shown.

The function is stateless, so text streamed in pieces (a sequence split between two deltas) is safe piece by
piece. `--json` output is made inert by `json_line` instead: JSON escapes C0 controls itself, and C1 and DEL are
escaped as `\\u00XX` (the same string to a JSON reader)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]")
_CRLF = re.compile(r"\r+\n")
_C1_AND_DEL = re.compile(r"[\x7f-\x9f]")


def _visible(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def safe_text(text: str) -> str:
    """`text` with every control sequence made inert (see the module docstring). Printable text is unchanged."""
    if _ANY.search(text) is None:
        return text
    text = _CRLF.sub("\n", text)
    text = _CSI.sub("", text)
    return _ANY.sub(_visible, text)


def json_text(text: str) -> str:
    """JSON text (made by `json.dumps`, which escapes C0 controls) with C1 and DEL escaped too: inert on a
    terminal, the same values to a JSON reader (outside strings JSON has no such characters)."""
    return _C1_AND_DEL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def json_line(obj: Any) -> str:
    """`obj` as one line of JSON (UTF-8 kept) that is inert on a terminal."""
    return json_text(json.dumps(obj, ensure_ascii=False))


class SafeConsole(Console):
    """A rich Console that sanitises the text of every segment it writes (not its own control segments and
    styles): whatever reaches it, from a model or a tool, is shown inert. Callers still pass sanitised text where
    they can, so that widths are measured on what is shown."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(
            segment if segment.control else Segment(safe_text(segment.text), segment.style, None)
            for segment in buffer)
