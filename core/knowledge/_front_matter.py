"""Front-matter: a small, strict subset of YAML, so that what a document claims about itself is never guessed.

Accepted, and nothing else:

    ---
    id: restart-database
    tags: [ops, database]
    ---

- The block starts at the very first byte of the file with a line that is exactly `---` and ends at the next
  line that is exactly `---` (a line may end with `\\r\\n`). No closing line: an error.
- Between them: blank lines, comment lines starting with `#`, and at most one `id:` and one `tags:` line. Any other
  key, a repeated key or a line that is not `key: value` is an error naming the line.
- `id`: letters, digits and `_ . / -`, starting with a letter or digit, at most 200 characters; it may be wrapped
  in one pair of matching quotes.
- `tags`: a flow list `[a, b]` (possibly empty) of distinct tags, each letters, digits and `_ . -`, starting with a
  letter or digit, at most 64 characters, each optionally quoted.

A file that does not start with `---` has no front-matter: its id is its path and it has no tags. A file whose
front-matter is not accepted is reported (`bad_front_matter`) and is not indexed."""

from __future__ import annotations

import re

from core.record import record

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]{0,199}$")
_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = "---"


class FrontMatterError(ValueError):
    """The front-matter block is not in the accepted subset; the message names the line and the reason."""


@record
class FrontMatter:
    id: str | None
    tags: tuple[str, ...]
    content_offset: int
    """Bytes (UTF-8) from the start of the file to the first byte after the block; 0 without a block."""
    content_chars: int
    """The same position in characters."""


def parse_front_matter(text: str) -> FrontMatter:
    if not text.startswith(_FENCE) or _bare(text[:text.find("\n") + 1] or text) != _FENCE:
        return FrontMatter(id=None, tags=(), content_offset=0, content_chars=0)
    lines = _lines(text)
    doc_id: str | None = None
    tags: tuple[str, ...] | None = None
    chars = len(lines[0])
    for number, line in enumerate(lines[1:], start=2):
        chars += len(line)
        body = _bare(line)
        if body == _FENCE:
            return FrontMatter(id=doc_id, tags=tags or (), content_offset=len(text[:chars].encode("utf-8")),
                               content_chars=chars)
        if not body.strip() or body.lstrip().startswith("#"):
            continue
        match = _LINE.match(body)
        if match is None:
            raise FrontMatterError(f"front-matter line {number}: expected `id: VALUE` or `tags: [A, B]`")
        key, value = match.group(1), match.group(2) or ""
        if key == "id":
            if doc_id is not None:
                raise FrontMatterError(f"front-matter line {number}: `id` given twice")
            doc_id = _id(_unquote(value), number)
        elif key == "tags":
            if tags is not None:
                raise FrontMatterError(f"front-matter line {number}: `tags` given twice")
            tags = _tags(value, number)
        else:
            raise FrontMatterError(f"front-matter line {number}: unknown key {key!r} (accepted: id, tags)")
    raise FrontMatterError("front-matter opened with `---` on line 1 is never closed by a `---` line")


def _lines(text: str) -> list[str]:
    """Lines split at `\\n` only, each with its ending (`str.splitlines` would also split at form feeds and
    Unicode separators, which are text here)."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def _bare(line: str) -> str:
    """The line without its line ending (`\\n` or `\\r\\n`)."""
    if line.endswith("\r\n"):
        return line[:-2]
    return line.rstrip("\n")


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _id(value: str, number: int) -> str:
    if not _ID.match(value):
        raise FrontMatterError(f"front-matter line {number}: id {value!r} must be letters, digits and `_ . / -`, "
                               "starting with a letter or digit, at most 200 characters")
    return value


def _tags(value: str, number: int) -> tuple[str, ...]:
    if not (value.startswith("[") and value.endswith("]")):
        raise FrontMatterError(f"front-matter line {number}: tags must be a list such as [ops, database]")
    inner = value[1:-1].strip()
    if not inner:
        return ()
    out: list[str] = []
    for item in (_unquote(part.strip()) for part in inner.split(",")):
        if not _TAG.match(item):
            raise FrontMatterError(f"front-matter line {number}: tag {item!r} must be letters, digits and "
                                   "`_ . -`, starting with a letter or digit, at most 64 characters")
        if item in out:
            raise FrontMatterError(f"front-matter line {number}: tag {item!r} given twice")
        out.append(item)
    return tuple(out)
