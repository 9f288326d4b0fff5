"""The local knowledge index: reading a corpus from disk, the SQLite FTS5 index derived from its manifest (in the
Strata home, one file per manifest digest), the search/get service every surface uses, and the agent's two tools.
The pure parts (documents, manifest, terms, grants, answers) are in `core/knowledge/`."""

from core.knowledge import DEFAULT_LIMIT, MAX_LIMIT
from memory.knowledge._corpus import load_corpus
from memory.knowledge._index import (
    INDEX_DIR,
    BuildReport,
    IndexRow,
    KnowledgeIndex,
    LexicalOutcome,
    indexed_documents,
)
from memory.knowledge._service import KnowledgeLookup, KnowledgeService
from memory.knowledge._tools import GET, SEARCH, knowledge_tools

__all__ = [
    "DEFAULT_LIMIT",
    "GET",
    "INDEX_DIR",
    "MAX_LIMIT",
    "SEARCH",
    "BuildReport",
    "IndexRow",
    "KnowledgeIndex",
    "KnowledgeLookup",
    "KnowledgeService",
    "LexicalOutcome",
    "indexed_documents",
    "knowledge_tools",
    "load_corpus",
]
