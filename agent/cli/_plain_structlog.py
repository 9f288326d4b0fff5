"""structlog without rich. `import structlog` imports its dev renderer, which imports rich's console, traceback and
pretty printer (about a third of a reading command's start-up) only to offer rich tracebacks. Strata's stderr
renderer never shows one: `format_exc_info` turns an exception into plain text before any renderer sees it, and
observability/logging.py gives the console renderer the plain formatter explicitly. So the command line imports
structlog once with rich hidden, before anything else does; rich stays importable for the commands that draw with
it (`chat`, `attach`, the timeline's table)."""

from __future__ import annotations

import sys

_HIDDEN = ("rich", "better_exceptions")
"""What structlog.dev and structlog.tracebacks would import for their optional pretty tracebacks."""


def import_structlog_plain() -> None:
    """Import structlog as if rich were not installed (nothing, when either is already imported)."""
    if "structlog" in sys.modules or any(name in sys.modules for name in _HIDDEN):
        return
    for name in _HIDDEN:
        sys.modules[name] = None  # type: ignore[assignment]  # `import rich` raises ImportError: structlog's fallback
    try:
        import structlog  # noqa: F401
    finally:
        for name in _HIDDEN:
            del sys.modules[name]
