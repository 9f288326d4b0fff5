"""Fault injection for crash tests only: `STRATA_FAULT=<point>[:<n>]` kills this process with SIGKILL the n-th
time (default first) execution reaches `<point>`. Points: after_commit, after_receipt, after_dispatch,
before_batch_completed, after_batch_completed, after_child (a delegated child session
finished, its parent has not recorded the result), after_reply_sent (a channel's reply is out, the book not yet
updated), after_parked_turn_finished (a channel thread's next message finished the parked turn, its task not yet
settled), before_task_status (a channel message's turn has ended, its task's status not yet recorded nor its
reply sent). Unset in normal use, so each point costs one dict lookup."""

from __future__ import annotations

import os
import signal

FAULT_ENV = "STRATA_FAULT"
"""Never passed to a process Strata starts for other code (bash commands, hooks): a nested `strata` would die."""

_counts: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    name, _, n = spec.partition(":")
    if not name or not (n or "1").isdecimal() or int(n or "1") < 1:
        # read at import, before any command's error handling: a test's typo is one line (exit 1), not a bug report
        raise SystemExit(f"strata: error: {FAULT_ENV}={spec!r} is malformed: it is for crash tests only, "
                         "<point>[:<n>] with n a whole number from 1; unset it")
    return name, int(n or "1")


_TARGET = _target()


def armed(name: str) -> bool:
    """Whether `name` is the configured fault point (lets callers skip work that only a fault needs)."""
    return _TARGET is not None and _TARGET[0] == name


def fault_point(name: str) -> None:
    if _TARGET is None or _TARGET[0] != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if _counts[name] == _TARGET[1]:
        os.kill(os.getpid(), signal.SIGKILL)
