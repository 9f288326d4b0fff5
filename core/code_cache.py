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
that cannot be read as such is ignored (and replaced on the next save). The file is indexed (core/indexed_file.py):
a start reads the code of the sources it runs, not the whole file (a development checkout's holds every module's,
~2,800 sources, 1 MB, when a command runs a few hundred).

Compiling as `exec` would: file name `<string>`, and without inheriting this module's `__future__` flags (the
callers' modules have none that matter, and `dataclasses` has none at all)."""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any
from zlib import crc32

from core.indexed_file import IndexedFile, build, text_key
from core.regular_file import NotRegular, read_regular

MAX_ENTRIES = 4096
"""A saved file keeps at most this many sources (past it, only the ones this process used)."""

_MAGIC = b"strata-code/indexed\n" + importlib.util.MAGIC_NUMBER
"""The file's first bytes: what it is, and the bytecode version of the code it holds (as a `.pyc` says)."""
_codes: dict[str, CodeType] = {}
"""Code this process compiled or took from the file, by source."""
_file = IndexedFile()
"""The loaded file: each entry is `(source, code)` marshalled, read when its source is first run (a command runs
some of the file's sources, not all)."""
_fresh: dict[int, bytes] = {}
"""Entries this process made for sources the file lacks (or holds damaged), marshalled, by key: what `save` adds."""
_used: set[int] = set()
"""The keys of the file's entries this process ran."""
compiles = 0
"""Sources this process compiled (not found compiled): what a test reads to see the file was used."""


_EVAL = "\x00eval\x00"
"""What an expression's key starts with (`compile_expression`): no source text does (`compile` refuses a null
character), so an expression and a statement of the same text are two entries."""


def compiled(source: str) -> CodeType:
    """`source` compiled as `exec(source)` compiles it, once per process (or found in the loaded file)."""
    if source.startswith("\x00"):  # never source (compile refuses it, as it does here): not an expression's key
        return compile(source, "<string>", "exec", dont_inherit=True)
    return _compiled(source, source, "exec")


def compile_expression(source: Any, filename: Any = "<string>", mode: Any = "exec", /, *args: Any,
                       **kwargs: Any) -> Any:
    """`compile`, for `typing`: the expression of a forward reference, `compile(text, '<string>', 'eval')` as
    `typing.ForwardRef` calls it, is compiled once per process and kept in the file with the generated methods
    (pydantic makes a `ForwardRef` of each string annotation it evaluates, ~780 of them in a resume, ~210
    distinct, ~4% of its instructions). Any other call is `compile`'s own, inheriting no `__future__` flag unless
    told to (`typing` has none to pass on; this module's are not the caller's)."""
    if type(source) is not str or filename != "<string>" or mode != "eval" or args or kwargs:
        if len(args) < 2:
            kwargs.setdefault("dont_inherit", True)
        return compile(source, filename, mode, *args, **kwargs)
    return _compiled(_EVAL + source, source, "eval")


def evaluate(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> Any:
    """`eval`, for `collections`: the `__new__` of each named tuple is made with `eval(text, namespace)`, and
    that text is compiled once (as an expression, `compile_expression`). Given no namespace, or anything but
    text, this is `eval`'s own, in the caller's namespace."""
    if type(source) is not str or globals is None:
        if globals is None:
            caller = sys._getframe(1)
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        return builtins.eval(source, globals, locals)
    return builtins.eval(_compiled(_EVAL + source, source, "eval"), globals, locals)


def _compiled(key: str, source: str, mode: str) -> CodeType:
    global compiles
    code = _codes.get(key)
    if code is None:
        file_key = crc32(key.encode("utf-8", "surrogatepass")) & 0x3FFFFFFF  # text_key, inline: ~600 sources run
        raw = _file.get(file_key)  # this on a resume's way in
        if raw is not None:
            try:
                entry = marshal.loads(raw)
            except (ValueError, EOFError, TypeError):
                entry = None
            if type(entry) is tuple and len(entry) == 2 and entry[0] == key and type(entry[1]) is CodeType:
                code = entry[1]  # the source is kept to check: two sources may share a file key
                _used.add(file_key)
        if code is None:
            code = compile(source, "<string>", mode, dont_inherit=True)
            compiles += 1
            with contextlib.suppress(ValueError):  # never expected (code marshals); not kept if it happened
                _fresh.setdefault(file_key, marshal.dumps((key, code)))
        _codes[key] = code
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


def _read_file(path: Path) -> IndexedFile:
    try:
        return IndexedFile.parse(regular_file_bytes(path), _MAGIC)  # another Python's code (or none): empty
    except OSError:
        return IndexedFile()


def regular_file_bytes(path: Path) -> bytes:
    """The file's bytes; nothing for what is not a regular file (a FIFO there would block the start forever, a
    device would be read without end: core/regular_file.py)."""
    try:
        return read_regular(path)
    except NotRegular:
        return b""


def read(path: Path) -> dict[str, CodeType]:
    """The compiled code saved at `path` by this Python, by source; nothing for a missing or unreadable file, or one
    another Python wrote (an entry that is not a source's code is left out)."""
    found: dict[str, CodeType] = {}
    for file_key, entry in _read_file(path).values():
        if (type(entry) is tuple and len(entry) == 2 and type(entry[0]) is str and isinstance(entry[1], CodeType)
                and text_key(entry[0]) == file_key):
            found[entry[0]] = entry[1]
    return found


def load(path: Path) -> None:
    """Take the compiled code saved at `path` (each source's read when it is first run)."""
    global _file
    _file = _read_file(path)


def save(path: Path) -> None:
    """Write the compiled code to `path` if this process compiled any source the file lacks (atomically: a
    reader sees the old file or the new one). Best effort, as Python's own bytecode writes are: a failure to write
    changes nothing but the next start's speed."""
    global _file
    fresh = dict(_fresh)  # copied at once: the daemon's threads may define classes meanwhile
    if not fresh:
        return
    data = build(_MAGIC, _file.merged(fresh, _used, MAX_ENTRIES))
    try:
        write_file(path, data)
    except OSError:
        return
    _file = IndexedFile.parse(data, _MAGIC)
    for key in fresh:
        _fresh.pop(key, None)
        _used.add(key)


def write_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (a reader sees the old file or the new one). A new file of a name no other
    writer uses (two processes of one pid, in two containers sharing the directory, say), created exclusively as
    Python creates its bytecode files: never written through a file or a link already there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(6).hex()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with open(fd, "wb") as file:
            file.write(data)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
