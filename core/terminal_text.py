"""Text shown on a terminal is inert: the one sanitiser every terminal surface uses (the CLI through
agent/cli/output.py, rich consoles through agent/terminal/safe_text.py).

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
- the bidirectional formatting characters (the embeddings and overrides U+202A-U+202E, the isolates
  U+2066-U+2069, the marks U+200E, U+200F and U+061C) are shown as visible escapes such as `\\u202e` too: they
  reorder what a terminal shows (a session title, a file name, a summary could read as something else: the
  "Trojan Source" trick), and text Strata shows is to read as it is stored.

The function is stateless, so text streamed in pieces (a sequence split between two deltas) is safe piece by
piece. `--json` output is made inert by `json_line` instead: JSON escapes C0 controls itself, and C1, DEL and the
bidirectional formatting characters are escaped as `\\uXXXX` (the same string to a JSON reader)."""

from __future__ import annotations

import json
import re
from typing import Any

_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]")
_CRLF = re.compile(r"\r+\n")
_JSON_UNSAFE = _ANY
_ASCII_INERT = bytes(range(0x20, 0x7F)) + b"\t\n"
"""The ASCII characters `_ANY` does not match: printable ones, newline and tab."""


def _no_control(text: str) -> bool:
    """`_ANY.search(text) is None`. A long text (a whole table of rows printed at once: ~300 KB for the denied calls
    of a long session) is checked by deleting from its UTF-8 the printable ASCII, newlines and tabs (none of them in
    the class) and searching only what is left, its other characters: ~0.9 ms for that table rather than the
    2.4 ms of the expression trying its class at every character."""
    if len(text) <= 256:
        return _ANY.search(text) is None
    rest = text.encode("utf-8", "surrogatepass").translate(None, _ASCII_INERT)
    return not rest or _ANY.search(rest.decode("utf-8", "surrogatepass")) is None


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_text(text: str) -> str:
    """`text` with every control sequence made inert (see the module docstring). Printable text is unchanged."""
    if (text.isascii() and text.isprintable()) or _no_control(text):  # printable ASCII holds no control
        return text
    text = _CRLF.sub("\n", text)
    text = _CSI.sub("", text)
    return _ANY.sub(_visible, text)


def one_line(text: str) -> str:
    """`text` with its line breaks shown as visible escapes (`\\n`, `\\r`): a value from elsewhere (an MCP server's
    tool name, its error message) shown within a line of Strata's own, where a line break would let it add lines
    that read as Strata's."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def visible_controls(text: str) -> str:
    """`text` with every control but newline and tab, and every bidirectional formatting character, shown as its
    visible escape (`\\x1b`, `\\u202e`), nothing dropped (a carriage return before a newline aside): for a document
    a person reads somewhere other than a terminal (the HTML export), where an override would reorder what is shown
    just as it does on a terminal."""
    if (text.isascii() and text.isprintable()) or _no_control(text):
        return text
    return _ANY.sub(_visible, _CRLF.sub("\n", text))


def json_text(text: str) -> str:
    """JSON text with every control but newline and tab (C0, DEL, C1) escaped as `\\u00XX`: inert on a terminal,
    the same values to a JSON reader (`json.dumps` escapes C0 itself, and outside strings JSON has no controls)."""
    if _no_control(text):
        return text
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def json_line(obj: Any) -> str:
    """`obj` as one line of JSON (UTF-8 kept) that is inert on a terminal."""
    return json_text(json.dumps(obj, ensure_ascii=False))
