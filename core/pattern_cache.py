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
is damaged, another Python's, or not a mapping of patterns to opcodes is ignored and replaced at the next save."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import marshal
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import code_cache

_sre: Any
_compiler: Any
_parser: Any
try:  # the engine and the compiler of CPython's `re` (no stubs: private modules)
    _sre, _compiler, _parser = (importlib.import_module(name) for name in ("_sre", "re._compiler", "re._parser"))
except ImportError:  # another implementation of `re`: nothing is installed
    _sre = _compiler = _parser = None

MAX_ENTRIES = 2048
"""A saved file keeps at most this many patterns (past it, only the ones this process used)."""

_MAGIC = b"strata-re\n" + importlib.util.MAGIC_NUMBER + str(getattr(_sre, "MAGIC", "")).encode() + b"\n"
_Key = tuple[str | bytes, int]
_saved: dict[_Key, bytes] = {}
"""The loaded file's opcodes by pattern and flags, each still marshalled."""
_made: dict[_Key, bytes] = {}
"""Patterns this process compiled anew, marshalled as the file keeps them."""
_used: set[_Key] = set()
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
    key = (p, int(flags))
    if _recording:  # a long-lived process (the daemon) does not collect what its work compiles
        _used.add(key)
    raw = _saved.get(key)
    if raw is not None:
        if (found := _from_saved(p, raw)) is not None:
            return found
        _saved.pop(key, None)  # not opcodes this engine takes: replaced by what is compiled now, at the next save
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
            _made[key] = marshal.dumps(made)
    return _sre.compile(p, *made)


def _from_saved(pattern: str | bytes, raw: bytes) -> Any:
    try:
        made = marshal.loads(raw)
        flags, code, groups, groupindex, indexgroup = made
        if not (type(flags) is int and type(code) is list and type(groups) is int and type(groupindex) is dict
                and type(indexgroup) is tuple):
            return None
        return _sre.compile(pattern, flags, code, groups, groupindex, indexgroup)
    except (ValueError, EOFError, TypeError, RuntimeError, OverflowError):  # RuntimeError: invalid SRE code
        return None


def install() -> bool:
    """Compile patterns through `compile_pattern` from now on in this process. False (nothing changed) where `re` is not
    the one this module knows (its compiler's parts missing, or a probe pattern compiled here differs from what `re`
    makes of it: another Python's engine), or something else already stands in for its compiler."""
    global _original, _recording, compiles
    if _sre is None or _original is not None or not callable(getattr(_compiler, "_code", None)):
        return False
    if getattr(_compiler.compile, "__module__", None) != _compiler.__name__:
        return False
    _original, recording, counted = _compiler.compile, _recording, compiles
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


def read(path: Path) -> dict[_Key, bytes]:
    """The patterns saved at `path` by this Python (each one's opcodes still marshalled); nothing for a missing or
    unreadable file, one another Python wrote, or one that is not such a mapping."""
    try:
        raw = code_cache.regular_file_bytes(path)
        if not raw.startswith(_MAGIC):
            return {}
        data = marshal.loads(raw[len(_MAGIC):])
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: value for key, value in data.items()
            if type(key) is tuple and len(key) == 2 and isinstance(key[0], str | bytes) and type(key[1]) is int
            and type(value) is bytes}


def load(path: Path) -> None:
    """Take the patterns saved at `path`."""
    for key, raw in read(path).items():
        _saved.setdefault(key, raw)


def save(path: Path) -> None:
    """Write the patterns to `path` if this process compiled any the file lacks (atomically; best effort, as
    Python's own bytecode writes are)."""
    made = dict(_made)  # copied at once: the daemon's threads may compile meanwhile
    new = made.keys() - _saved.keys()
    if not new:
        return
    keep = dict(_saved)
    if len(keep) + len(new) > MAX_ENTRIES:
        keep = {key: raw for key, raw in keep.items() if key in _used}
    keep.update((key, made[key]) for key in new)
    try:
        code_cache.write_file(path, _MAGIC + marshal.dumps(keep))
    except (OSError, ValueError):
        return
    _saved.update(keep)
