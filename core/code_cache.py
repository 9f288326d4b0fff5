"""Compiled code for generated source: the methods `dataclasses` (and `@record`, core/record.py) write as text.

Python 3.11 compiles each method a dataclass generates from source text with `exec`: `strata resume` defines some
180 dataclasses on its way in (Strata's and pydantic's, annotated_types', structlog's), about 250 small functions,
and compiling them was ~16 ms of its start (bench/cli_startup.py), while their code is the same in every process.
`run(source, globals, locals)` does what `exec(source, globals, locals)` does, compiling each distinct source once
per process; `load`/`save` keep the compiled code between processes in a file beside the package's bytecode, as
Python keeps `.pyc` files (`default_path`: under `PYTHONPYCACHEPREFIX` when that is set; the CLI writes none
under `PYTHONDONTWRITEBYTECODE`, agent/cli/startup_code.py). Whoever can write there can replace the bytecode
too, so the file is trusted as the `.pyc` files beside it are. It holds code objects keyed by their whole source
text, so a source that changes (another Python, another version of a library) is simply compiled anew; a file
that cannot be read as such a mapping is ignored (and replaced on the next save).

Compiling as `exec` would: file name `<string>`, and without inheriting this module's `__future__` flags (the
callers' modules have none that matter, and `dataclasses` has none at all)."""

from __future__ import annotations

import builtins
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

MAX_ENTRIES = 4096
"""A saved file keeps at most this many sources (past it, only the ones this process used)."""

_MAGIC = b"strata-code\n" + importlib.util.MAGIC_NUMBER
"""The file's first bytes: what it is, and the bytecode version of the code it holds (as a `.pyc` says)."""
_codes: dict[str, CodeType] = {}
_used: set[str] = set()
_loaded: set[str] = set()
compiles = 0
"""Sources this process compiled (not found compiled): what a test reads to see the file was used."""


def compiled(source: str) -> CodeType:
    """`source` compiled as `exec(source)` compiles it, once per process (or found in the loaded file)."""
    global compiles
    code = _codes.get(source)
    if code is None:
        code = compile(source, "<string>", "exec", dont_inherit=True)
        _codes[source] = code
        compiles += 1
    _used.add(source)
    return code


def run(source: Any, globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None, /) -> None:
    """`exec` for generated source (anything but text, a code object say, goes to `exec` as it is)."""
    if isinstance(source, str):
        source = compiled(source)
    builtins.exec(source, globals, locals)


def default_path() -> Path | None:
    """Where this Python keeps the compiled code beside core's own bytecode; None where it writes none."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    here = Path(__file__).resolve().parent
    name = f"generated_code.{tag}.marshal"
    if sys.pycache_prefix:
        return Path(sys.pycache_prefix) / here.relative_to(here.anchor) / name
    return here / "__pycache__" / name


def read(path: Path) -> dict[str, CodeType]:
    """The compiled code saved at `path` by this Python; nothing for a missing or unreadable file, one another
    Python wrote, or one that is not a mapping of source text to code."""
    try:
        raw = path.read_bytes()
        if not raw.startswith(_MAGIC):
            return {}
        data = marshal.loads(raw[len(_MAGIC):])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {source: code for source, code in data.items() if isinstance(source, str) and isinstance(code, CodeType)}


def load(path: Path) -> None:
    """Take the compiled code saved at `path` (`read`)."""
    for source, code in read(path).items():
        _codes.setdefault(source, code)
        _loaded.add(source)


def save(path: Path) -> None:
    """Write the compiled code to `path` if this process compiled any source the file lacks (atomically: a
    reader sees the old file or the new one). Best effort, as Python's own bytecode writes are: a failure to write
    changes nothing but the next start's speed."""
    codes = dict(_codes)  # copied at once: the daemon's threads may define classes meanwhile
    if not (codes.keys() - _loaded):
        return
    keep = codes if len(codes) <= MAX_ENTRIES else {s: codes[s] for s in set(_used) if s in codes}
    try:
        data = _MAGIC + marshal.dumps(keep)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        try:
            partial.write_bytes(data)
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    except (OSError, ValueError):
        return
    _loaded.update(keep)
