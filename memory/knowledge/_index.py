"""The knowledge index: SQLite FTS5 with its built-in bm25(), derived from one manifest and named by its digest.

Each manifest gets its own database file, `<home>/knowledge-index/<digest>.db` (0600), so sessions over different
corpora (two workspaces, two configs) never rebuild each other's index, and "rebuilt when the manifest digest
changes" is simply "a file of that name does not exist yet". A build writes a temporary file beside it and
renames it into place: a reader sees the whole old index or the whole new one, never half of either. A file is
never changed once it is in place, so readers open it read-only and immutable (no locks, no journal). The newest
few files are kept; an older one removed while a reader has it open stays readable to that reader, and one that is
gone is rebuilt from the corpus the next time it is asked for.

Each dataset has its own FTS5 table, so bm25's statistics (and the document frequencies of the discriminating
rule) are the dataset's own: one dataset's documents never move another's ranking. Documents are inserted in
(dataset, id) order, so rowids follow that order and ties in score break by dataset, then id.

The API is synchronous and blocking (sqlite3): async callers run it in a worker thread (`anyio.to_thread`);
each call opens its own connection, so calls from several threads never share one."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import structlog

from config.private_files import create_private, private_dir
from core.errors import StoreError
from core.knowledge import Corpus, Document, fts_phrase, is_discriminating
from core.record import record

log = structlog.get_logger("strata.knowledge")

INDEX_DIR = "knowledge-index"
FORMAT = 1
KEEP_INDEXES = 8
WEIGHTS = (2.0, 2.0, 1.0)
"""bm25 column weights: the document's name (id and filename), its tags, its text."""
_TOKENIZE = "unicode61 remove_diacritics 2"


@record
class IndexRow:
    document: Document
    text: str
    score: float | None = None
    """bm25, negated: higher is better."""
    matched_terms: tuple[str, ...] = ()


@record
class LexicalOutcome:
    rows: tuple[IndexRow, ...]
    """Best first; ties by dataset, then id."""
    common_terms: tuple[str, ...]
    """Query terms found only where they are too common to count."""


@record
class BuildReport:
    path: Path
    digest: str
    documents: int
    seconds: float


class DamagedIndex(sqlite3.DatabaseError):
    """The index file opens and its header is sound, but its rows disagree with it (a document row garbled, or
    gone while the full-text index still holds it)."""


class KnowledgeIndex:
    """The index of one corpus in one Strata home. Built on first use (or by `ensure`)."""

    def __init__(self, home: Path, corpus: Corpus, *, keep: int = KEEP_INDEXES,
                 on_replaced: Callable[[str], None] | None = None) -> None:
        self.home = home
        self.corpus = corpus
        self.keep = keep
        self.on_replaced = on_replaced
        """Told (one line) when a file in the index's place could not be read as its index and was built again:
        derived data is rebuilt, but never in silence."""
        self.directory = home / INDEX_DIR
        self.path = self.directory / f"{corpus.manifest.digest}.db"
        self._checked = False

    @property
    def digest(self) -> str:
        return self.corpus.manifest.digest

    # -- building ------------------------------------------------------------------------------------------------

    def ensure(self) -> BuildReport | None:
        """Build the index unless a complete one for this manifest is in place; the report when it was built."""
        if self._checked and self.path.exists():
            return None
        problem = self._problem()
        if problem is None:
            self._checked = True
            return None
        report = self.rebuild()
        if problem != "missing":
            line = (f"the knowledge index {self.path} could not be read as the index of this corpus ({problem}); "
                    "it was built again from the corpus")
            log.info("knowledge index replaced", path=str(self.path), problem=problem)
            if self.on_replaced is not None:
                self.on_replaced(line)
        return report

    def rebuild(self) -> BuildReport:
        """Build the index from the corpus and put it in place atomically (replacing one of the same digest)."""
        started = time.monotonic()
        try:
            private_dir(self.directory)
            tmp = self.directory / f".{self.digest}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
            create_private(tmp)
            try:
                self._build(tmp)
                _fsync(tmp)
                os.replace(tmp, self.path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
            _fsync(self.directory)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot build the knowledge index in {self.directory}: {exc}",
                             hint="check that the Strata home is writable and has space") from None
        self._checked = True
        self._prune()
        return BuildReport(path=self.path, digest=self.digest, documents=len(self.corpus.manifest.documents),
                           seconds=time.monotonic() - started)

    def _build(self, path: Path) -> None:
        manifest = self.corpus.manifest
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=OFF")  # a temporary file: a failed build is thrown away whole
            db.execute("PRAGMA synchronous=OFF")   # made durable by the fsync before the rename
            db.execute("PRAGMA cache_size=-65536")
            db.execute("BEGIN")
            db.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("CREATE TABLE datasets(name TEXT PRIMARY KEY, fts TEXT NOT NULL, documents INTEGER NOT NULL)")
            db.execute("CREATE TABLE docs(rowid INTEGER PRIMARY KEY, dataset TEXT NOT NULL, doc_id TEXT NOT NULL, "
                       "meta TEXT NOT NULL, name TEXT NOT NULL, tags TEXT NOT NULL, body TEXT NOT NULL)")
            db.executemany(
                "INSERT INTO docs(rowid, dataset, doc_id, meta, name, tags, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
                ((n, d.dataset, d.id, d.model_dump_json(), _name(d), " ".join(d.tags), self.corpus.texts[d.key])
                 for n, d in enumerate(manifest.documents, start=1)))
            db.execute("CREATE UNIQUE INDEX docs_key ON docs(dataset, doc_id)")
            db.execute("CREATE INDEX docs_id ON docs(doc_id)")
            for number, entry in enumerate(manifest.datasets):
                table = f"fts_{number}"
                db.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(name, tags, body, content='docs', "
                           f"content_rowid='rowid', tokenize='{_TOKENIZE}')")
                # One merge at the end ('optimize') instead of merging segments as they are written.
                db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
                db.execute(f"INSERT INTO {table}(rowid, name, tags, body) "
                           "SELECT rowid, name, tags, body FROM docs WHERE dataset = ? ORDER BY rowid", (entry.name,))
                db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                db.execute("INSERT INTO datasets(name, fts, documents) VALUES (?, ?, ?)",
                           (entry.name, table, entry.documents))
            db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                           (("format", str(FORMAT)), ("digest", self.digest)))
            db.execute("COMMIT")
        finally:
            db.close()

    def _problem(self) -> str | None:
        """Why the file in the index's place is not a complete index of this manifest ("missing" when there is
        none), or None."""
        try:
            with self._open() as db:
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        except FileNotFoundError:
            return "missing"
        except (OSError, sqlite3.Error) as exc:
            return str(exc) or type(exc).__name__
        if meta.get("format") != str(FORMAT):
            return f"format {meta.get('format')!r}, not {FORMAT}"
        if meta.get("digest") != self.digest:
            return "it was built for another manifest"
        return None

    def _prune(self) -> None:
        """Keep the newest `keep` indexes (this one always); drop temporary files a killed build left."""
        with contextlib.suppress(OSError):
            now = time.time()
            indexes: list[tuple[float, Path]] = []
            for entry in self.directory.iterdir():
                st = entry.stat()
                if entry.name.endswith(".tmp") and now - st.st_mtime > 3600:
                    entry.unlink(missing_ok=True)
                elif entry.suffix == ".db" and entry != self.path:
                    indexes.append((st.st_mtime, entry))
            for _, old in sorted(indexes, reverse=True)[max(self.keep - 1, 0):]:
                old.unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _open(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            yield db
        finally:
            db.close()

    def _connect(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise FileNotFoundError(self.path)
        return sqlite3.connect(self.path.as_uri() + "?mode=ro&immutable=1", uri=True)

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        self.ensure()
        try:
            db = self._connect()
        except (FileNotFoundError, sqlite3.OperationalError):
            self._checked = False  # pruned by another process meanwhile: build it again
            self.ensure()
            db = self._connect()
        try:
            yield db
        finally:
            db.close()

    def lexical(self, datasets: Sequence[str], terms: Sequence[str], share: float, limit: int) -> LexicalOutcome:
        """The best `limit` documents of `datasets` holding at least one of `terms` that is discriminating in their
        dataset (core/knowledge/_terms.py), ranked by bm25 over those terms."""
        rows: list[tuple[float, int, IndexRow]] = []
        common: dict[str, None] = {}
        try:
            with self._reader() as db:
                tables = dict(db.execute("SELECT name, fts FROM datasets").fetchall())
                sizes = dict(db.execute("SELECT name, documents FROM datasets").fetchall())
                for dataset in datasets:
                    table = tables.get(dataset)
                    if table is None:
                        continue
                    chosen: list[str] = []
                    for term in terms:
                        (df,) = db.execute(f"SELECT count(*) FROM {table} WHERE {table} MATCH ?",
                                           (fts_phrase(term),)).fetchone()
                        if is_discriminating(df, sizes[dataset], share):
                            chosen.append(term)
                        elif df:
                            common.setdefault(term, None)
                    if chosen:
                        rows.extend(self._ranked(db, table, chosen, limit))
                found = {t for _, _, r in rows for t in r.matched_terms}
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the knowledge index {self.path}: {exc}",
                             hint="rebuild it: strata knowledge rebuild") from None
        rows.sort(key=lambda item: (item[0], item[1]))
        return LexicalOutcome(rows=tuple(r for _, _, r in rows[:limit]),
                              common_terms=tuple(t for t in common if t not in found))

    def _ranked(self, db: sqlite3.Connection, table: str, terms: list[str],
                limit: int) -> list[tuple[float, int, IndexRow]]:
        expression = " OR ".join(fts_phrase(t) for t in terms)
        weights = ", ".join(str(w) for w in WEIGHTS)
        hits = db.execute(f"SELECT rowid, bm25({table}, {weights}) AS score FROM {table} WHERE {table} MATCH ? "
                          "ORDER BY score, rowid LIMIT ?", (expression, limit)).fetchall()
        out = []
        for rowid, score in hits:
            matched = tuple(t for t in terms if db.execute(
                f"SELECT 1 FROM {table} WHERE {table} MATCH ? AND rowid = ?",
                (fts_phrase(t), rowid)).fetchone())
            out.append((score, rowid, self._row(db, rowid, score=-score, matched=matched)))
        return out

    def exact(self, datasets: Sequence[str], doc_id: str) -> tuple[IndexRow, ...]:
        """The documents of `datasets` whose id is exactly `doc_id` (at most one per dataset)."""
        try:
            with self._reader() as db:
                marks = ", ".join("?" for _ in datasets)
                found = db.execute(f"SELECT rowid FROM docs WHERE doc_id = ? AND dataset IN ({marks}) ORDER BY rowid",
                                   (doc_id, *datasets)).fetchall()
                if not found:
                    self._check_counts(db, datasets)  # a miss only if the rows it looked among are all there
                return tuple(self._row(db, rowid) for (rowid,) in found)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the knowledge index {self.path}: {exc}",
                             hint="rebuild it: strata knowledge rebuild") from None

    @staticmethod
    def _check_counts(db: sqlite3.Connection, datasets: Sequence[str]) -> None:
        """Each of `datasets` holds as many document rows as the index recorded when it was built: rows lost since
        (while its header stays sound) make a look-up by id miss documents that are there, as search finds them
        gone (`_row`). One count per dataset over the index on (dataset, doc_id), on a miss only."""
        marks = ", ".join("?" for _ in datasets)
        for name, recorded in db.execute(f"SELECT name, documents FROM datasets WHERE name IN ({marks})",
                                         tuple(datasets)).fetchall():
            (rows,) = db.execute("SELECT count(*) FROM docs WHERE dataset = ?", (name,)).fetchone()
            if rows != recorded:
                raise DamagedIndex("its document rows are damaged")

    @staticmethod
    def _row(db: sqlite3.Connection, rowid: int, *, score: float | None = None,
             matched: tuple[str, ...] = ()) -> IndexRow:
        found = db.execute("SELECT meta, body FROM docs WHERE rowid = ?", (rowid,)).fetchone()
        try:
            if found is None:  # the full-text index holds a document whose row is gone
                raise ValueError(rowid)
            meta, body = found
            return IndexRow(document=Document.model_validate(json.loads(meta)), text=body, score=score,
                            matched_terms=matched)
        except (ValueError, TypeError):
            raise DamagedIndex("its document rows are damaged") from None


def indexed_documents(home: Path, digest: str) -> tuple[Document, ...] | None:
    """The documents of the index built for manifest `digest` in `home`, if that index is still there (None when
    it was pruned, never built, or cannot be read): what a resumed session compares the corpus of now with."""
    if not digest.startswith("kn_") or not digest[3:].isalnum():
        return None
    path = home / INDEX_DIR / f"{digest}.db"
    try:
        db = sqlite3.connect(path.as_uri() + "?mode=ro&immutable=1", uri=True)
    except sqlite3.Error:
        return None
    try:
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("format") != str(FORMAT) or meta.get("digest") != digest:
            return None
        return tuple(Document.model_validate_json(m) for (m,) in db.execute("SELECT meta FROM docs ORDER BY rowid"))
    except (sqlite3.Error, ValueError):
        return None
    finally:
        db.close()


def _name(doc: Document) -> str:
    return doc.id if doc.id == doc.filename else f"{doc.id} {doc.filename}"


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
