"""What a lookup answers: hits, each bound to the bytes it quotes, or one explicit miss. Never a paraphrase of a
document that was not found.

A hit's `byte_range` is `[start, end)` in the *source file*: `source[start:end]` is exactly `text` as UTF-8, so a
citation can be checked against the file (`source_sha256`) and against the document's content
(`content_sha256`, the bytes from `content_offset` to the end of the file). An exact lookup returns the whole
content; a lexical hit returns the section of the document that matched best (see `_sections.py`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

MatchMethod = Literal["exact", "lexical"]
MissKind = Literal["no_manifest", "unknown_dataset", "dataset_denied", "ambiguous_id", "not_found", "weak_match"]

REFUSALS: frozenset[MissKind] = frozenset({"no_manifest", "unknown_dataset", "dataset_denied"})
"""Misses decided before any lookup: the request itself cannot be served."""


class Hit(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    dataset: str
    id: str
    filename: str
    tags: tuple[str, ...]
    text: str
    byte_range: tuple[int, int]
    """`[start, end)` of `text` in the source file."""
    content_sha256: str
    content_bytes: int
    source_path: str
    source_sha256: str
    method: MatchMethod
    score: float | None = None
    """Lexical only: the FTS5 bm25 score, negated (higher is better); scored on the dataset's own statistics."""
    matched_terms: tuple[str, ...] = ()
    """Lexical only: the discriminating query terms the document holds."""


class Hits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    result: Literal["hits"] = "hits"
    hits: tuple[Hit, ...]
    manifest_digest: str


class Miss(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    result: Literal["miss"] = "miss"
    kind: MissKind
    reason: str
    hint: str | None = None
    dataset: str | None = None
    id: str | None = None
    missing_grant: str | None = None
    """`unknown_dataset` / `dataset_denied`: the config grant that would allow the request."""
    candidates: tuple[str, ...] = ()
    """`ambiguous_id`: the documents (`dataset/id` or source paths) that claim the id."""
    common_terms: tuple[str, ...] = ()
    """`weak_match`: the query terms that were too common to count."""
    manifest_digest: str | None = None

    @property
    def refusal(self) -> bool:
        return self.kind in REFUSALS


Answer = Annotated[Hits | Miss, Field(discriminator="result")]
ANSWER_ADAPTER: TypeAdapter[Hits | Miss] = TypeAdapter(Answer)
