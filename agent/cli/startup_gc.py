"""A command starts without the cyclic garbage collector: importing a command's modules (some 100 pydantic models
and 180 dataclasses for `strata resume`) allocates hundreds of thousands of objects that all live as long as the
process, and the collector would walk them again and again while they are made (about 30 ms of a resume's start,
bench/cli_startup.py). Once the command's module is imported, what exists is moved out of the collector's sight
(`gc.freeze`: it is module-level state that is never garbage) and the collector runs as usual for the command's
work, so a long session or the daemon collects its cycles as before."""

from __future__ import annotations

import gc


class StartupGC:
    """Pauses the collector from `pause` until `settle` (or `restore`), then leaves it as it found it."""

    def __init__(self) -> None:
        self._was_enabled = False
        self._paused = False

    def pause(self) -> None:
        """Paused until `settle` or `restore`; a second pause changes nothing (the entry paused before the command
        line's modules were imported, agent/cli/entry.py, and `main` pauses for whoever calls it directly)."""
        if self._paused:
            return
        self._was_enabled = gc.isenabled()
        self._paused = True
        gc.disable()

    def settle(self) -> None:
        """The command's modules are imported: freeze what exists and collect as before from here on."""
        if self._paused:
            gc.freeze()
            self.restore()

    def restore(self) -> None:
        """The collector as it was before `pause` (also when no command was imported: `strata --help`)."""
        if self._paused:
            self._paused = False
            if self._was_enabled:
                gc.enable()


startup_gc = StartupGC()
