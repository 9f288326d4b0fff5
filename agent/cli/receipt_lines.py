"""What `strata receipts` prints of a receipt, shared by its full way (agent/cli/inspect_cmds.py, through
agent/cli/views.py `receipt_view`) and its quick way (agent/cli/quick_receipts.py): the masked view (part of the
`--json` contract: fields are added, never renamed) and the lines. No models: a receipt here is anything with a
Receipt's fields (memory/rows.py), its process group given as the JSON object `model_dump(mode="json")` makes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from agent.cli.output import echo, echo_json
from agent.receipt_reads import receipt_reads as receipt_reads
from core.clock import iso
from core.masking import Masker


class ReceiptFields(Protocol):
    """A receipt's fields as the view reads them (memory/rows.py Receipt has them, and memory/quick_read.py
    QuickReceipt)."""

    @property
    def id(self) -> str: ...
    @property
    def session_id(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def idempotency_key(self) -> str: ...
    @property
    def args_sha256(self) -> str: ...
    @property
    def resource_keys(self) -> Sequence[str]: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def outcome_sha256(self) -> str | None: ...
    @property
    def note(self) -> str | None: ...
    @property
    def reconciled_by(self) -> str | None: ...


def receipt_fields(r: ReceiptFields, masker: Masker, process: dict[str, Any] | None) -> dict[str, Any]:
    """Masked where a secret can show: resource keys name paths, notes and names are typed by people, and the call
    id (in the idempotency key too) and the tool name were chosen by the model."""
    return {
        "id": r.id,
        "session_id": r.session_id,
        "call_id": masker.mask(r.call_id),
        "tool": masker.mask(r.tool),
        "status": r.status,
        "reads": receipt_reads(r),
        "idempotency_key": masker.mask(r.idempotency_key),
        "args_sha256": r.args_sha256,
        "resource_keys": [masker.mask(k) for k in r.resource_keys],
        "created_at": iso(r.created_at),
        "updated_at": iso(r.updated_at),
        "outcome_sha256": r.outcome_sha256,
        "note": masker.mask(r.note) if r.note else r.note,
        "reconciled_by": masker.mask(r.reconciled_by) if r.reconciled_by else r.reconciled_by,
        "process": process,
    }


def print_receipts(views: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        for v in views:
            echo_json(v)
        return
    if not views:
        echo("no receipts")
    for v in views:
        extra = f"  ({v['reconciled_by']}: {v['note']})" if v["reconciled_by"] else ""
        echo(f"{v['id']}  {v['reads']:<11} {v['tool']:<10} call {v['call_id']}  session {v['session_id']}"
             f"{extra}")
