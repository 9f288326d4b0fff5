"""The local knowledge index, its pure parts: documents bound to their bytes, front-matter, the manifest and its
digest, query terms and the discriminating-term rule, the dataset grant check, and the typed answers (hits and
misses). Reading files and the SQLite FTS5 index live in `memory/knowledge/`; dataset declarations in
`config/knowledge.py`."""

from core.knowledge._document import (
    DATASET_PATTERN,
    DOCUMENT_SUFFIXES,
    MAX_DOCUMENT_BYTES,
    CorpusProblem,
    Document,
    LoadedDocument,
    ProblemKind,
    read_document,
)
from core.knowledge._front_matter import FrontMatter, FrontMatterError, parse_front_matter
from core.knowledge._grants import DatasetGrant, check_scope, pii_of
from core.knowledge._manifest import Corpus, DatasetEntry, Manifest, build_corpus, manifest_digest
from core.knowledge._results import ANSWER_ADAPTER, REFUSALS, Answer, Hit, Hits, MatchMethod, Miss, MissKind
from core.knowledge._sections import SECTION_MAX_BYTES, best_section, sections
from core.knowledge._terms import common_limit, fts_phrase, is_discriminating, query_terms, tokens

__all__ = [
    "ANSWER_ADAPTER",
    "DATASET_PATTERN",
    "DOCUMENT_SUFFIXES",
    "MAX_DOCUMENT_BYTES",
    "REFUSALS",
    "SECTION_MAX_BYTES",
    "Answer",
    "Corpus",
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
    "check_scope",
    "common_limit",
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
