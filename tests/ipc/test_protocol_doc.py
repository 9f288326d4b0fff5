"""agent/ipc/PROTOCOL.md is the protocol's reference: every request and push type, every field of each, every
error code and every `Limits` bound the code has is named there (a new one without its line fails here)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from pydantic import BaseModel

from agent import ipc
from agent.ipc._messages import REQUEST_TYPES

DOC = (Path(ipc.__file__).parent / "PROTOCOL.md").read_text(encoding="utf-8")


def _models(union: object) -> list[type[BaseModel]]:
    return list(get_args(get_args(union)[0]))


def test_every_request_push_reply_field_error_code_and_limit_is_in_the_protocol_reference() -> None:
    missing = [f"request type {t}" for t in sorted(REQUEST_TYPES) if f"`{t}`" not in DOC]
    for model in [*_models(ipc.Request), *_models(ipc.ServerMessage), ipc.SessionInfo, ipc.WaitingCall,
                  ipc.StoreCounts, ipc.ParkedView]:
        missing += [f"{model.__name__}.{name}" for name in model.model_fields if f"`{name}`" not in DOC]
    missing += [f"error code {code}" for code in get_args(ipc.ErrorCode) if f"`{code}`" not in DOC]
    missing += [f"Limits.{name}" for name in ipc.Limits.model_fields if f"`{name}`" not in DOC]
    assert not missing, missing
