"""A table as rich draws it on a stream that is not a terminal, without rich's console: the same characters, for
the tables the command line prints to a pipe or a file (drawing 1,000 rows with rich takes over a second; this
takes milliseconds).

It draws exactly one shape, rich's `Table(box=None, pad_edge=False)` of single-line cells that are `no_wrap`
with `overflow="ellipsis"`: fixed-width columns, and a last column as wide as its widest cell up to a maximum.
Cells are measured and cut in terminal cells with rich's own cell functions (wide characters, combining marks).
Whatever falls outside that shape (a cell with a newline or a tab, a line wider than the page) is not drawn here
(`None`): the caller draws it with rich. tests/cli/test_plain_table.py compares both, character for character."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from core.record import record

__all__ = ["Column", "plain_table"]


@record
class Column:
    header: str
    width: int | None
    """Cells wide (padding excluded); None: as wide as the widest cell, at most `max_width`."""
    justify: Literal["left", "right"] = "left"
    max_width: int | None = None


_PRINTABLE_ASCII = bytes(range(0x20, 0x7F))


def printable_ascii(text: str) -> bool:
    """`text.isascii() and text.isprintable()`, for a long text (a whole table: ~400 KB for the denied calls of a
    long session): the printable characters deleted from its ASCII bytes, rather than each character looked up in
    the Unicode tables (~3x fewer instructions)."""
    return text.isascii() and not text.encode("ascii").translate(None, _PRINTABLE_ASCII)


def cell_width(text: str) -> int:
    """rich's measure of terminal cells; printable ASCII (almost every cell) is one cell a character, measured
    without importing rich."""
    if text.isascii() and text.isprintable():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _fit(text: str, width: int, justify: Literal["left", "right"]) -> str:
    """The cell as rich's Text shows it `width` cells wide, no wrap, ellipsis."""
    if justify == "right":
        text = text.rstrip()
    cells = cell_width(text)
    if cells > width and text.isascii() and text.isprintable():  # a character is a cell
        text, cells = text[: width - 1] + "…", width
    elif cells > width:
        from rich.cells import set_cell_size

        text = set_cell_size(text, width - 1) + "…"
        cells = cell_width(text)
    pad = " " * (width - cells)
    return pad + text if justify == "right" else text + pad


def plain_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, header: bool,
                page_width: int) -> list[str] | None:
    """The table's lines, or None when rich would draw it otherwise than this function does."""
    shown = [[c.header for c in columns], *rows] if header else list(rows)
    text = "".join(map("".join, shown))  # every cell as one text: one check, not one per row or cell
    if "\n" in text or "\t" in text or "\r" in text:
        return None
    printable = printable_ascii(text)  # then so is every cell, and every line drawn of them
    widths = []
    for index, column in enumerate(columns):
        if column.width is not None:
            widths.append(column.width)
            continue
        cells = [row[index] for row in shown]
        joined = "".join(cells)
        if printable or printable_ascii(joined):  # a character a cell (cell_width)
            widest = max(map(len, cells), default=0)
        else:
            widest = max(map(cell_width, cells), default=0)
        widths.append(widest if column.max_width is None else min(widest, column.max_width))
    last = len(columns) - 1
    # Each cell has one space of padding either side, but none at the table's outer edges (pad_edge=False).
    if sum(widths) + 2 * last > page_width:
        return None
    plan = [(width, column.justify) for width, column in zip(widths, columns, strict=True)]
    # Almost every row is printable ASCII whose cells fit their columns: one format pads them all (a right-justified
    # cell without its trailing spaces, as below), and the line is that row's exactly when it is as long as the
    # table is wide (a longer cell would make it longer) and printable ASCII (so then is every cell).
    layout = "  ".join(f"%{width}s" if justify == "right" else f"%-{width}s" for width, justify in plan)
    wide = sum(widths) + 2 * last
    right = [index for index, (_, justify) in enumerate(plan) if justify == "right"]
    # Printable ASCII cells that are too long for their column (a denied call's check, on every such row) are cut as
    # `_fit` cuts them, a character a cell: each cell of a line that came out too long is looked at (measuring every
    # column first to find those that hold one was ~2% of a long denied-calls table).
    columns_at = list(enumerate(widths))
    lines = []
    for row in shown:
        values = list(row)
        for index in right:
            values[index] = values[index].rstrip()
        line = layout % tuple(values)
        if len(line) == wide and (printable or (line.isascii() and line.isprintable())):
            lines.append(line)
            continue
        if printable:
            for index, width in columns_at:
                if len(values[index]) > width:
                    values[index] = values[index][: width - 1] + "…"
            line = layout % tuple(values)
            if len(line) == wide:
                lines.append(line)
                continue
        cells = []
        for cell, (width, justify) in zip(row, plan, strict=True):
            if cell.isascii() and cell.isprintable():  # almost every cell: `_fit` without its calls
                if justify == "right":
                    cell = cell.rstrip()
                if len(cell) <= width:
                    cells.append(cell.rjust(width) if justify == "right" else cell.ljust(width))
                    continue
            cells.append(_fit(cell, width, justify))
        lines.append("  ".join(cells))
    return lines
