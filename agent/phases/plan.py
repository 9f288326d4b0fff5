"""Plan: turn a model response into a typed proposal. Text only is an `AssistantMessage` (a proposal to finish);
with tool calls, a `BatchProposed` holding the assistant content and the planned calls with input digests."""

from __future__ import annotations

from core.events import AssistantMessage, BatchProposed, PlannedCall, TokenUsage
from core.hashing import sha256_json
from core.messages import TextBlock
from core.model import ModelResponse

EMPTY_ANSWER = "(the model returned an empty answer)"
"""Stands in for an answer with no content: the API refuses an assistant message without content, so an empty
answer kept as it came would make every later request of the session invalid. Verify reads it as empty."""


def propose(response: ModelResponse, batch_id: str) -> AssistantMessage | BatchProposed:
    # Blank text blocks are dropped for the same reason (the API refuses empty text blocks).
    content = tuple(b for b in response.content if not (isinstance(b, TextBlock) and not b.text.strip()))
    uses = response.tool_uses
    reported = response.usage
    usage = TokenUsage(input_tokens=reported.input_tokens, output_tokens=reported.output_tokens,
                       cache_read_tokens=reported.cache_read_tokens, cache_write_tokens=reported.cache_write_tokens)
    if usage == TokenUsage():
        usage = None  # the scripted model reports nothing; keep its events as they were
    if not uses:
        return AssistantMessage(content=content or (TextBlock(text=EMPTY_ANSWER),), usage=usage)
    calls = tuple(PlannedCall(call_id=u.id, tool=u.name, input=u.input, input_sha256=sha256_json(u.input))
                  for u in uses)
    return BatchProposed(batch_id=batch_id, content=content, calls=calls, usage=usage)
