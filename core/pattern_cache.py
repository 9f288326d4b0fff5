"""Compiled regular expressions kept between processes, as Python keeps bytecode.

`re` compiles a pattern in Python (`re._parser` parses it, `re._compiler` turns it into the opcodes of the C
engine, which `_sre.compile` takes): `strata resume` compiles some 110 on its way in (the masking detectors, the
config's checks, tomllib's, pydantic's), about 13 ms of CPU of every start (bench/cli_startup.py), while the
opcodes of a pattern are the same in every process of one Python. `compile_pattern` does what
`re._compiler.compile` does (3.11 to 3.13 alike), keeping each string pattern's opcodes; `install` puts it in that
function's place (the CLI does, agent/cli/startup_code.py: Strata used as a library leaves `re` alone). A pattern
whose opcodes an earlier start saved is handed to `_sre.compile` as they are; the engine checks them and refuses
code that is not well formed, and such a pattern, like any other, is compiled anew. Like bytecode, a saved pattern
gives no warning its parse gave (a FutureWarning about a set, say) when it is taken from the file.

The file is kept as core/code_cache.py keeps its code: beside core's bytecode, trusted as that bytecode is (who can
write there can change the code itself), its header naming this Python's bytecode and engine versions; a file that
is damaged, another Python's, or not an index of patterns to opcodes is ignored and replaced at the next save. It is
indexed as that file is (core/indexed_file.py): a start reads the opcodes of the patterns it compiles, not every
pattern the file holds (a development checkout's holds every module's)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import marshal
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import code_cache
from core.indexed_file import IndexedFile, build, text_key

_sre: Any
_compiler: Any
_parser: Any
try:  # the engine and the compiler of CPython's `re` (no stubs: private modules)
    _sre, _compiler, _parser = (importlib.import_module(name) for name in ("_sre", "re._compiler", "re._parser"))
except ImportError:  # another implementation of `re`: nothing is installed
    _sre = _compiler = _parser = None

MAX_ENTRIES = 2048
"""A saved file keeps at most this many patterns (past it, only the ones this process used)."""



def _fingerprint() -> bytes:
    """This interpreter's build and its `re` compiler's and parser's source files (size and time): a file written
    under the same fingerprint was written by a start whose probe (`install`) found `re` compiling as this module
    does, so a start that finds one need not run the probe again."""
    parts = [sys.version]
    for module in (_compiler, _parser):
        try:
            found = os.stat(module.__file__)
            parts.append(f"{found.st_size}:{found.st_mtime_ns}")
        except (OSError, TypeError, AttributeError):  # no such file (a frozen module, say): never the same as one
            parts.append("?")
    return "|".join(parts).encode("utf-8", "backslashreplace")


_MAGIC = (b"strata-re/indexed\n" + importlib.util.MAGIC_NUMBER + str(getattr(_sre, "MAGIC", "")).encode() + b"\n"
          + _fingerprint() + b"\n")
_Key = tuple[str | bytes, int]
_file = IndexedFile()
"""The loaded file: each entry is `(pattern, flags, opcodes)`, the opcodes still marshalled, read when the pattern
is compiled."""
_made: dict[int, bytes] = {}
"""Entries for the patterns this process compiled anew, by file key (core/indexed_file.py)."""
_used: set[int] = set()
_original: Callable[..., Any] | None = None
_recording = True
"""New patterns are kept only until `stop_recording`: the CLI stops once the command's modules are imported. What
is compiled before is the modules' own patterns (text in their source); what a command compiles afterwards may be
made of what it read (a configured secret the masker looks for) and is never written to the file."""
compiles = 0
"""Patterns this process compiled (not found in the file): what a test reads to see the file was used."""


def compile_pattern(p: Any, flags: int = 0) -> Any:
    """`re._compiler.compile(p, flags)`: a compiled pattern, its opcodes taken from the file when it has them."""
    global compiles
    if not isinstance(p, str | bytes) or flags & re.DEBUG:  # a parsed pattern (re.Scanner's), or one to print
        return _compiler.compile(p, flags) if _original is None else _original(p, flags)
    file_key = _file_key(p, int(flags))
    if _recording:  # a long-lived process (the daemon) does not collect what its work compiles
        _used.add(file_key)
    raw = _file.get(file_key)
    if raw is not None and (found := _from_saved(p, int(flags), raw)) is not None:
        return found  # else not this pattern's, or not opcodes this engine takes: replaced at the next save
    parsed = _parser.parse(p, flags)
    code = _compiler._code(parsed, flags)
    groupindex = parsed.state.groupdict
    indexgroup: list[str | None] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    made = (int(flags | parsed.state.flags), [int(op) for op in code], parsed.state.groups - 1, dict(groupindex),
            tuple(indexgroup))  # plain ints: the compiler's opcodes are named ints, which marshal does not take
    compiles += 1
    if _recording:
        with contextlib.suppress(ValueError):  # never expected (plain values only); not kept if it happened
            _made[file_key] = marshal.dumps((p, int(flags), marshal.dumps(made)))
    return _sre.compile(p, *made)


def _file_key(pattern: str | bytes, flags: int) -> int:
    """The pattern's key in the file (core/indexed_file.py): a text and its bytes are two patterns."""
    return text_key(pattern, flags ^ 0xFFFFFFFF if isinstance(pattern, bytes) else flags)


def _from_saved(pattern: str | bytes, flags: int, raw: bytes | memoryview) -> Any:
    try:
        entry = marshal.loads(raw)
        if type(entry) is not tuple or len(entry) != 3 or type(entry[2]) is not bytes:
            return None
        if type(entry[0]) is not type(pattern) or entry[0] != pattern or entry[1] != flags:
            return None  # another pattern of the same file key
        made = marshal.loads(entry[2])
        flags, code, groups, groupindex, indexgroup = made
        if not (type(flags) is int and type(code) is list and type(groups) is int and type(groupindex) is dict
                and type(indexgroup) is tuple):
            return None
        return _sre.compile(pattern, flags, code, groups, groupindex, indexgroup)
    except (ValueError, EOFError, TypeError, RuntimeError, OverflowError):  # RuntimeError: invalid SRE code
        return None


def install(path: Path | None = None) -> bool:
    """Compile patterns through `compile_pattern` from now on in this process, taking the patterns saved at `path`
    (when given). False (nothing changed) where `re` is not the one this module knows (its compiler's parts missing,
    or a probe pattern compiled here differs from what `re` makes of it: another Python's engine), or something else
    already stands in for its compiler. The probe (two compiles by `re`'s parser, ~5M instructions, about 1 ms of
    every start) is skipped when `path` holds patterns saved under this interpreter's and `re`'s fingerprint: the
    start that saved them ran it on the same `re`."""
    global _original, _recording, compiles, _file
    if _sre is None or _original is not None or not callable(getattr(_compiler, "_code", None)):
        return False
    if getattr(_compiler.compile, "__module__", None) != _compiler.__name__:
        return False
    file = _read_file(path) if path is not None else IndexedFile()
    _original = _compiler.compile
    if not len(file):
        recording, counted = _recording, compiles
        _recording = False  # the probe is neither kept nor counted
        try:
            probe = r"(?P<word>[a-z_]+)\s*(?:=|:)\s*(\d+|\"[^\"]*\")$"
            same = compile_pattern(probe, re.IGNORECASE) == _original(probe, re.IGNORECASE)
        except Exception:  # any failure of the probe: leave `re` as it is
            same = False
        finally:
            _recording, compiles = recording, counted
        if not same:
            _original = None
            return False
    _file = file
    _compiler.compile = compile_pattern
    return True


def stop_recording() -> None:
    """Keep no pattern compiled from now on (those kept so far are still saved)."""
    global _recording
    _recording = False


def default_path() -> Path | None:
    """Where this Python keeps the compiled patterns beside core's own bytecode; None where it writes none."""
    found = code_cache.default_path()
    return None if found is None else found.with_name(found.name.replace("generated_code.", "compiled_patterns.", 1))


def _read_file(path: Path) -> IndexedFile:
    try:
        return IndexedFile.parse(code_cache.regular_file_bytes(path), _MAGIC)
    except OSError:
        return IndexedFile()


def read(path: Path) -> dict[_Key, bytes]:
    """The patterns saved at `path` by this Python (each one's opcodes still marshalled); nothing for a missing or
    unreadable file, or one another Python wrote (an entry that is not a pattern's opcodes is left out)."""
    found: dict[_Key, bytes] = {}
    for file_key, entry in _read_file(path).values():
        if (type(entry) is tuple and len(entry) == 3 and isinstance(entry[0], str | bytes)
                and type(entry[1]) is int and type(entry[2]) is bytes and _file_key(entry[0], entry[1]) == file_key):
            found[(entry[0], entry[1])] = entry[2]
    return found


def entries(patterns: dict[_Key, bytes]) -> dict[int, bytes]:
    """Patterns and their marshalled opcodes (as `read` gives them) as the file's entries, by file key."""
    return {_file_key(p, flags): marshal.dumps((p, flags, raw)) for (p, flags), raw in patterns.items()}


def load(path: Path) -> None:
    """Take the patterns saved at `path` (each one's opcodes read when it is compiled)."""
    global _file
    _file = _read_file(path)


def save(path: Path) -> None:
    """Write the patterns to `path` if this process compiled any the file lacks (atomically; best effort, as
    Python's own bytecode writes are)."""
    global _file
    made = dict(_made)  # copied at once: the daemon's threads may compile meanwhile
    if not made:
        return
    data = build(_MAGIC, _file.merged(made, _used, MAX_ENTRIES))
    try:
        code_cache.write_file(path, data)
    except OSError:
        return
    _file = IndexedFile.parse(data, _MAGIC)
    for key in made:
        _made.pop(key, None)
