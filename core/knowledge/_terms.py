"""Query terms and the discriminating-term rule.

Terms are read the way the index's tokenizer (SQLite FTS5 `unicode61 remove_diacritics 2`) reads text: runs of
letters and digits, lower-cased, diacritics removed; everything else separates. The index is always asked with
each term quoted, so no query is FTS5 syntax and what a term means never depends on its spelling.

A term counts for a match in a dataset only when it is *discriminating* there: it occurs in at least one of the
dataset's documents and in no more than `share` of them (at least one document, so that a dataset of one
document still has terms). Stop words and near-universal words ("the", "python" in Python's own documentation) are
common and do not count: a query made only of them is a weak match, never a list of arbitrary documents."""

from __future__ import annotations

import re
import unicodedata

MAX_TERMS = 32
MAX_TERM_CHARS = 64
_TOKEN = re.compile(r"[^\W_]+")


def normalise(text: str) -> str:
    """Lower-cased, without diacritics, as the index's tokenizer compares (simple lower-casing and canonical
    decomposition: `ß` stays `ß`, a ligature stays itself, as in FTS5's unicode61)."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """Every token of `text`, in order, repeats kept."""
    return _TOKEN.findall(normalise(text))


def query_terms(query: str) -> tuple[str, ...]:
    """The distinct terms of a query, in the order given; at most MAX_TERMS, each at most MAX_TERM_CHARS."""
    seen: dict[str, None] = {}
    for token in tokens(query):
        if len(token) <= MAX_TERM_CHARS:
            seen.setdefault(token, None)
        if len(seen) == MAX_TERMS:
            break
    return tuple(seen)


def fts_phrase(term: str) -> str:
    """A term as an FTS5 string: quoted, so it is never read as an operator or a column filter."""
    return '"' + term.replace('"', '""') + '"'


def common_limit(documents: int, share: float) -> float:
    """The document frequency above which a term is common in a dataset of `documents` documents."""
    return max(share * documents, 1.0)


def is_discriminating(document_frequency: int, documents: int, share: float) -> bool:
    return 0 < document_frequency <= common_limit(documents, share)
