"""Plan: turn a model response into a typed proposal. Text only is an `AssistantMessage` (a proposal to finish);
with tool calls, a `BatchProposed` holding the assistant content and the planned calls with input digests.

The response is reviewed as a whole first (core/proposal.py): text made valid UTF-8, unsafe or repeated ids
renamed, calls over a limit refused. Nothing of an answer is committed that could not be stored, read back and
sent to the model again, so no answer can wedge the session."""

from __future__ import annotations

from collections.abc import Callable, Container

from core.events import AssistantMessage, BatchProposed, TokenUsage, batch_proposed
from core.messages import TextBlock
from core.model import ModelResponse
from core.proposal import review
from core.record import record

EMPTY_ANSWER = "(the model returned an empty answer)"
"""Stands in for an answer with no content: the API refuses an assistant message without content, so an empty
answer kept as it came would make every later request of the session invalid. Verify reads it as empty."""


@record
class Planned:
    """The proposal to commit, and what the review repaired or refused in the answer (for the timeline)."""

    proposal: AssistantMessage | BatchProposed
    notes: tuple[str, ...] = ()


def propose(response: ModelResponse, batch_id: str, *, used_ids: Container[str] = (),
            looks_secret: Callable[[str], bool] | None = None) -> Planned:
    """`used_ids`: the ids of the session's calls so far (a repeated one is renamed); `looks_secret`: whether
    masking would hide a string (an id that does is renamed too)."""
    reviewed = review(response.content, used_ids=used_ids, id_seed=batch_id, looks_secret=looks_secret)
    # Blank text blocks are dropped for the same reason (the API refuses empty text blocks).
    content = tuple(b for b in reviewed.content if not (isinstance(b, TextBlock) and not b.text.strip()))
    reported = response.usage
    usage: TokenUsage | None = None  # the scripted model reports nothing; keep its events as they were
    # Compared field by field, not as `TokenUsage(...) == TokenUsage()`: two models built and compared each turn.
    if (reported.input_tokens or reported.output_tokens or reported.cache_read_tokens
            or reported.cache_write_tokens):
        usage = TokenUsage(
            input_tokens=reported.input_tokens, output_tokens=reported.output_tokens,
            cache_read_tokens=reported.cache_read_tokens, cache_write_tokens=reported.cache_write_tokens)
    if not reviewed.calls:
        return Planned(AssistantMessage(content=content or (TextBlock(text=EMPTY_ANSWER),), usage=usage),
                       reviewed.notes)
    return Planned(batch_proposed(batch_id, content, reviewed.calls, usage),
                   reviewed.notes)
