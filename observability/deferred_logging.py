"""Logging set up at its first record. A command that seldom logs anything (`strata show`) installs this instead of
the full setup (observability/logging.py), which imports structlog: a few percent of such a command's CPU, spent
for nothing when nothing is logged. Its records take the same masking path all the same: the first one at INFO or
above (what the full setup would show on stderr or keep in the log file) runs the full setup, attaches the home
it was told of with its masker, and is handed to the handlers that setup made. Records after it go there directly.

`attach_home` is the one the runtime calls (observability/__init__.py): while the setup waits, it notes the home
and the masker for it; otherwise it is observability/logging.py's."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.masking import Masker


class _Waiting(logging.Handler):
    """On the root logger until the first record comes; the full setup replaces it then."""

    def __init__(self, setup: Callable[[], None], root_level: int) -> None:
        super().__init__(logging.INFO)  # the log file takes info and up (observability/logging.py)
        self._setup = setup
        self._root_level = root_level
        self.home: tuple[Path, Masker | None, dict[str, Any]] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        global _waiting
        root = logging.getLogger()
        # A new list: the one the logging module walks for this record ends with this handler, and the record goes
        # to the full setup's handlers below, once.
        root.handlers = [h for h in root.handlers if h is not self]
        root.setLevel(self._root_level)
        _waiting = None
        self._setup()
        if self.home is not None:
            home, masker, options = self.home
            attach_home(home, masker, **options)
        for handler in root.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


_waiting: _Waiting | None = None


def set_up_at_first_record(setup: Callable[[], None]) -> None:
    """Run `setup` (the full logging setup, observability/logging.py `configure_logging`) only when a record at
    INFO or above comes."""
    global _waiting
    root = logging.getLogger()
    if _waiting is not None:
        root.removeHandler(_waiting)
    _waiting = _Waiting(setup, root.level)
    root.setLevel(logging.INFO)
    root.addHandler(_waiting)


def attach_home(home: Path, masker: Masker | None = None, **options: Any) -> Path | None:
    """observability/logging.py `attach_home`; while the setup waits for its first record, noted for it (None)."""
    if _waiting is not None:
        _waiting.home = (home, masker, options)
        return None
    from observability.logging import attach_home as attach

    return attach(home, masker, **options)
