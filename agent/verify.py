"""Reflect: a proposal to finish becomes completion only through `verify_turn`. The model-path issue adds
PostVerify/Stop hooks and repairs within a budget; the built-in check here reports what the user must know."""

from __future__ import annotations

from dataclasses import dataclass

from core.state import SessionState


@dataclass(frozen=True)
class Verification:
    ok: bool
    notes: tuple[str, ...] = ()


def verify_turn(state: SessionState) -> Verification:
    notes = []
    if state.unknown_receipts:
        notes.append(f"{len(state.unknown_receipts)} call(s) with an unknown outcome await reconciliation")
    return Verification(ok=True, notes=tuple(notes))
