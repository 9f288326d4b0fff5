"""Plan: turn a model response into a typed proposal. Text only is an `AssistantMessage` (a proposal to finish);
with tool calls, a `BatchProposed` holding the assistant content and the planned calls with input digests."""

from __future__ import annotations

from core.events import AssistantMessage, BatchProposed, PlannedCall
from core.hashing import sha256_json
from core.model import ModelResponse


def propose(response: ModelResponse, batch_id: str) -> AssistantMessage | BatchProposed:
    uses = response.tool_uses
    if not uses:
        return AssistantMessage(content=response.content)
    calls = tuple(PlannedCall(call_id=u.id, tool=u.name, input=u.input, input_sha256=sha256_json(u.input))
                  for u in uses)
    return BatchProposed(batch_id=batch_id, content=response.content, calls=calls)
