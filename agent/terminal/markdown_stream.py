"""The assistant's text as Markdown while it streams: finished blocks (up to a blank line outside a code fence) are
printed once and never again; only the open block is re-rendered, inside the live area, so nothing flickers and
no committed text is printed twice. The first block carries the `assistant: ` label, the next ones are indented
under it."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.markdown import Markdown
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

LABEL = "assistant: "
CODE_THEME = "monokai"


def split_point(text: str) -> int:
    """Where the finished blocks of `text` end: the index after the last blank line outside a code fence (after
    a closing fence, too), 0 when no block is finished yet. Only whole lines count."""
    cut = 0
    fence: str | None = None
    position = 0
    for line in text.splitlines(keepends=True):
        position += len(line)
        if not line.endswith("\n"):
            break  # the line still streams
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and not stripped[len(fence):].strip():
                fence = None
                cut = position
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if not stripped:
            cut = position
    return cut


def labelled(body: RenderableType, first: bool) -> RenderableType:
    """A block of the assistant's message: the first one after the label, the next ones indented under it."""
    if not first:
        return Padding(body, (0, 0, 0, len(LABEL)))
    grid = Table.grid()
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(Text.assemble(("assistant", "bold cyan"), ": "), body)
    return grid


def markdown(text: str) -> Markdown:
    return Markdown(text, code_theme=CODE_THEME)


class MarkdownStream:
    """One assistant message at a time: `feed` its deltas, `finish` it when it is committed."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._open = ""
        self._blocks = 0
        self._after_fence = False
        self.shown = False
        """Some of this message's text reached the screen (committed or open)."""

    def feed(self, delta: str) -> None:
        self._open += delta
        self.shown = True
        cut = split_point(self._open)
        if cut and self._open[:cut].strip():
            done, self._open = self._open[:cut], self._open[cut:]
            self._commit(done)
        elif cut:  # blank lines only: nothing to show yet
            self._open = self._open[cut:]

    def _commit(self, text: str) -> None:
        fenced = text.lstrip("\n").startswith(("```", "~~~"))
        if self._blocks and not (fenced or self._after_fence):  # a code block brings its own blank lines
            self.console.print()
        self._after_fence = text.rstrip().endswith(("```", "~~~"))
        self.console.print(labelled(markdown(text.strip("\n")), first=not self._blocks))
        self._blocks += 1

    def open_block(self) -> RenderableType | None:
        """The block still streaming, as the live area shows it (None: nothing open)."""
        if not self._open.strip():
            return None
        body = labelled(markdown(self._open.strip("\n")), first=not self._blocks)
        fenced = self._open.lstrip("\n").startswith(("```", "~~~"))
        return Group(Text(""), body) if self._blocks and not (fenced or self._after_fence) else body

    def finish(self) -> None:
        """The message is complete: its open block is printed for good."""
        if self._open.strip():
            self._commit(self._open)
        self._open = ""
        self._blocks = 0
        self.shown = False

    def discard(self) -> None:
        """The attempt failed: its open text is dropped (what was committed stays on screen, marked void by the
        caller)."""
        self._open = ""
        self._blocks = 0
        self.shown = False

    def print_whole(self, text: str) -> None:
        """A committed message that did not stream (or not all of it): shown at once."""
        if text.strip():
            self.console.print(labelled(markdown(text.strip("\n")), first=True))
