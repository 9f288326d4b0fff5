"""Where a home keeps its evidence ledger (agent/evidence_ledger.py): `<home>/ledger/<session>.heads`, one heads
file per session that committed. The store reads the same layout to tell an emptied database from a new home."""

from __future__ import annotations

LEDGER_DIR = "ledger"
HEADS_SUFFIX = ".heads"
