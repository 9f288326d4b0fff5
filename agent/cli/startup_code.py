"""A command reuses the compiled code of the methods `dataclasses` generates, from one start to the next.

`dataclasses` writes each method it adds to a class as source text and compiles it with `exec`; `strata resume`
defines some 180 dataclasses on its way in (most of them pydantic's, annotated_types' and structlog's, not ours),
and compiling their ~250 methods was about 16 ms of each start. The CLI points the `exec` that `dataclasses` calls
at core/code_cache.py's `run` (the same call, compiling each distinct source once), and the `compile` that
`typing.ForwardRef` calls for each string annotation pydantic evaluates at `compile_expression`, and the `eval`
that makes each named tuple's `__new__` at `evaluate`; it loads the code an earlier start saved beside core's
bytecode, and saves what it compiled anew once the command's module is imported (with `startup_gc.settle`, by then
every start-up class exists) and again at the end. The regular
expressions compiled on the way in are kept the same way (core/pattern_cache.py). Only the CLI process does this:
Strata used as a library leaves `dataclasses`, `typing`, `collections` and `re` as they are."""

from __future__ import annotations

import collections
import dataclasses
import sys
import typing
from pathlib import Path

from core import code_cache, pattern_cache


class StartupCode:
    def __init__(self) -> None:
        self._path: Path | None = None
        self._patterns: Path | None = None

    def install(self) -> None:
        """Before the command's modules are imported. Does nothing if `dataclasses` already has an `exec` of its
        own (a second install, or another tool's); the compiled regular expressions likewise
        (core/pattern_cache.py)."""
        patterns = pattern_cache.default_path()
        if pattern_cache.install(patterns):
            self._patterns = patterns
        if "exec" in vars(dataclasses):
            return
        self._path = code_cache.default_path()
        if self._path is not None:
            code_cache.load(self._path)
        dataclasses.exec = code_cache.run  # type: ignore[attr-defined]  # found before the builtin
        if "compile" not in vars(typing):  # forward references' expressions (code_cache.compile_expression)
            typing.compile = code_cache.compile_expression  # type: ignore[attr-defined]
        if "eval" not in vars(collections):  # each named tuple's `__new__` (code_cache.evaluate)
            collections.eval = code_cache.evaluate  # type: ignore[attr-defined]

    def imported(self) -> None:
        """The command's modules are imported: the patterns compiled from here on are the command's own work (made
        of what it read, a secret to mask, say) and are not kept (core/pattern_cache.py)."""
        pattern_cache.stop_recording()

    def save(self) -> None:
        """Keep what this start compiled anew, unless Python writes no bytecode here (`PYTHONDONTWRITEBYTECODE`)."""
        if sys.dont_write_bytecode:
            return
        if self._path is not None:
            code_cache.save(self._path)
        if self._patterns is not None:
            pattern_cache.save(self._patterns)


startup_code = StartupCode()
