"""The assistant's Markdown as it streams (agent/terminal/markdown_stream.py): a block is printed once it is
finished (a blank line outside a code fence, or a closing fence), never again, and a code fence is never split at
its own blank lines, however the text is cut into deltas."""

from __future__ import annotations

import io

import pytest

from agent.terminal.markdown_stream import MarkdownStream, split_point
from agent.terminal.safe_text import SafeConsole

TEXT = "Intro with **bold**\n\n```python\nx = 1\n\ny = 2\n```\nAfter the fence.\n\n- first\n- second\n\nThe end"


@pytest.mark.parametrize(("text", "cut"), [
    ("no block yet", 0),
    ("one paragraph\n\nsecond", len("one paragraph\n\n")),
    ("```\ncode\n\nmore code", 0),  # a blank line inside an open fence finishes nothing
    ("p\n\n```\na\n\nb", 3),
    ("```\na\n```\nafter", len("```\na\n```\n")),  # a closing fence finishes its block
    ("half a line\n\nstill stre", len("half a line\n\n")),
])
def test_split_point(text: str, cut: int) -> None:
    assert split_point(text) == cut


@pytest.mark.parametrize("size", [1, 3, 7, len(TEXT)])
def test_each_block_is_printed_once_whatever_the_deltas(size: int) -> None:
    out = io.StringIO()
    stream = MarkdownStream(SafeConsole(file=out, width=80, color_system=None))
    for start in range(0, len(TEXT), size):
        stream.feed(TEXT[start:start + size])
    stream.finish()
    shown = out.getvalue()
    for piece in ("Intro with bold", "x = 1", "y = 2", "After the fence.", "• first", "• second", "The end"):
        assert shown.count(piece) == 1, (piece, shown)
    assert "**" not in shown and "```" not in shown
    assert shown.splitlines()[0].startswith("assistant: Intro with bold")


def test_a_failed_attempt_drops_its_open_text() -> None:
    out = io.StringIO()
    stream = MarkdownStream(SafeConsole(file=out, width=80, color_system=None))
    stream.feed("half an answer that will be retr")
    assert stream.shown and stream.open_block() is not None
    stream.discard()
    stream.finish()
    assert out.getvalue() == "" and not stream.shown
