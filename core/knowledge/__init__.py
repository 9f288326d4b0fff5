"""The local knowledge index, its pure parts: documents bound to their bytes, front-matter, the manifest and its
digest, what changed between two manifests (and the notice the model gets), query terms and the discriminating-term
rule, the dataset grant check, and the typed answers (hits and misses). Reading files and the SQLite FTS5 index
live in `memory/knowledge/`; dataset declarations in `config/knowledge.py`.

Names are loaded on first use (PEP 562), so that reading config or starting the CLI does not build the knowledge
models until something asks for them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.knowledge._changes import CorpusChanges, change_notice, corpus_changes
    from core.knowledge._document import (
        CorpusProblem,
        Document,
        LoadedDocument,
        ProblemKind,
        read_document,
    )
    from core.knowledge._front_matter import FrontMatter, FrontMatterError, parse_front_matter
    from core.knowledge._grants import DatasetGrant, check_scope, pii_of
    from core.knowledge._manifest import Corpus, DatasetEntry, Manifest, build_corpus, manifest_digest
    from core.knowledge._names import DATASET_PATTERN, DEFAULT_LIMIT, DOCUMENT_SUFFIXES, MAX_DOCUMENT_BYTES, MAX_LIMIT
    from core.knowledge._results import ANSWER_ADAPTER, REFUSALS, Answer, Hit, Hits, MatchMethod, Miss, MissKind
    from core.knowledge._sections import SECTION_MAX_BYTES, best_section, sections
    from core.knowledge._terms import common_limit, fts_phrase, is_discriminating, query_terms, tokens

_WHERE = {
    "ANSWER_ADAPTER": "core.knowledge._results",
    "Answer": "core.knowledge._results",
    "Corpus": "core.knowledge._manifest",
    "CorpusChanges": "core.knowledge._changes",
    "CorpusProblem": "core.knowledge._document",
    "DATASET_PATTERN": "core.knowledge._names",
    "DEFAULT_LIMIT": "core.knowledge._names",
    "DOCUMENT_SUFFIXES": "core.knowledge._names",
    "DatasetEntry": "core.knowledge._manifest",
    "DatasetGrant": "core.knowledge._grants",
    "Document": "core.knowledge._document",
    "FrontMatter": "core.knowledge._front_matter",
    "FrontMatterError": "core.knowledge._front_matter",
    "Hit": "core.knowledge._results",
    "Hits": "core.knowledge._results",
    "LoadedDocument": "core.knowledge._document",
    "MAX_DOCUMENT_BYTES": "core.knowledge._names",
    "MAX_LIMIT": "core.knowledge._names",
    "Manifest": "core.knowledge._manifest",
    "MatchMethod": "core.knowledge._results",
    "Miss": "core.knowledge._results",
    "MissKind": "core.knowledge._results",
    "ProblemKind": "core.knowledge._document",
    "REFUSALS": "core.knowledge._results",
    "SECTION_MAX_BYTES": "core.knowledge._sections",
    "best_section": "core.knowledge._sections",
    "build_corpus": "core.knowledge._manifest",
    "change_notice": "core.knowledge._changes",
    "check_scope": "core.knowledge._grants",
    "common_limit": "core.knowledge._terms",
    "corpus_changes": "core.knowledge._changes",
    "fts_phrase": "core.knowledge._terms",
    "is_discriminating": "core.knowledge._terms",
    "manifest_digest": "core.knowledge._manifest",
    "parse_front_matter": "core.knowledge._front_matter",
    "pii_of": "core.knowledge._grants",
    "query_terms": "core.knowledge._terms",
    "read_document": "core.knowledge._document",
    "sections": "core.knowledge._sections",
    "tokens": "core.knowledge._terms",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ANSWER_ADAPTER",
    "DATASET_PATTERN",
    "DEFAULT_LIMIT",
    "DOCUMENT_SUFFIXES",
    "MAX_DOCUMENT_BYTES",
    "MAX_LIMIT",
    "REFUSALS",
    "SECTION_MAX_BYTES",
    "Answer",
    "Corpus",
    "CorpusChanges",
    "CorpusProblem",
    "DatasetEntry",
    "DatasetGrant",
    "Document",
    "FrontMatter",
    "FrontMatterError",
    "Hit",
    "Hits",
    "LoadedDocument",
    "Manifest",
    "MatchMethod",
    "Miss",
    "MissKind",
    "ProblemKind",
    "best_section",
    "build_corpus",
    "change_notice",
    "check_scope",
    "common_limit",
    "corpus_changes",
    "fts_phrase",
    "is_discriminating",
    "manifest_digest",
    "parse_front_matter",
    "pii_of",
    "query_terms",
    "read_document",
    "sections",
    "tokens",
]
