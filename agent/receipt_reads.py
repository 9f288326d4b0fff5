"""A receipt's status as people read it, the one wording every command uses for it (`strata receipts`, `strata
reconcile`, an ambiguous receipt id's list of candidates)."""

from __future__ import annotations

from typing import Protocol


class _Decided(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def reconciled_by(self) -> str | None: ...


def receipt_reads(r: _Decided) -> str:
    """A receipt's status as people read it: one a person or a probe reconciled says what was decided (`applied`,
    `not applied`), not the status that records it (`done`, `failed`)."""
    if r.reconciled_by:
        if r.status == "failed":
            return "not applied"
        if r.status == "done":
            return "applied"
    return r.status
