"""A document of the knowledge corpus, bound to its exact bytes.

A file under a dataset's root is one document. Its *source* is the file's bytes as read (`source_sha256`); its
*content* is what follows the optional front-matter block (`content_sha256`, starting at byte `content_offset` of
the source). A file without front-matter has content == source, so both digests are the file's sha256. A citation
names the dataset, the id and the content digest, and anyone can check it against the file."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.knowledge._front_matter import FrontMatterError, parse_front_matter
from core.knowledge._names import DATASET_PATTERN, MAX_DOCUMENT_BYTES

DatasetName = Annotated[str, Field(pattern=DATASET_PATTERN)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_ID_CHARS = 512
"""The longest id: a document without a front-matter `id:` whose path is longer is reported, not indexed."""


class Document(BaseModel):
    """One indexed document: who it is, where it came from, and the digests that bind it to its bytes."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    dataset: DatasetName
    id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
    """The front-matter `id:`, or else the path relative to the dataset root (`/`-separated)."""
    filename: str
    """The path relative to the dataset root (`/`-separated)."""
    tags: tuple[str, ...] = ()
    content_sha256: Sha256
    source_path: str
    """The absolute path the file was read from."""
    source_sha256: Sha256
    content_offset: Annotated[int, Field(ge=0)]
    """Where the content starts in the source: 0 without front-matter."""
    content_bytes: Annotated[int, Field(ge=0)]

    @property
    def key(self) -> tuple[str, str]:
        return (self.dataset, self.id)


ProblemKind = Literal["invalid_utf8", "duplicate_id", "bad_front_matter", "bad_name", "too_large", "unreadable",
                      "not_followed", "missing_root"]


class CorpusProblem(BaseModel):
    """A file (or a root) that is part of a dataset but is not indexed, and why. Never silently dropped: the
    manifest lists it, `strata knowledge list` shows it, and a lookup of its id is a miss that says why."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    dataset: DatasetName
    kind: ProblemKind
    source_path: str
    source_sha256: Sha256 | None = None
    id: str | None = None
    """The id the file claims (or its relative path) when it could be read."""
    detail: str

    def line(self) -> str:
        return f"{self.dataset}: {self.source_path}: {self.kind.replace('_', ' ')}: {self.detail}"


class LoadedDocument(BaseModel):
    """A document and its content text: what the index is built from (the text is never re-read from disk)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    document: Document
    text: str


def read_document(dataset: str, filename: str, source_path: str, raw: bytes) -> LoadedDocument | CorpusProblem:
    """A document from a file's bytes, or the problem that keeps it out. Pure: the caller reads the file."""
    source_sha = hashlib.sha256(raw).hexdigest()

    def problem(kind: ProblemKind, detail: str, doc_id: str | None = None) -> CorpusProblem:
        return CorpusProblem(dataset=dataset, kind=kind, source_path=source_path, source_sha256=source_sha,
                             id=doc_id, detail=detail)

    if len(raw) > MAX_DOCUMENT_BYTES:
        return problem("too_large", f"{len(raw)} bytes (at most {MAX_DOCUMENT_BYTES})", filename)
    if _CONTROL.search(filename):
        return problem("bad_name", "the file name holds a control character")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return problem("invalid_utf8", f"not valid UTF-8 at byte {exc.start}", filename)
    try:
        front = parse_front_matter(text)
    except FrontMatterError as exc:
        return problem("bad_front_matter", str(exc), filename)
    if front.id is None and len(filename) > MAX_ID_CHARS:
        return problem("bad_name", f"the path in the dataset is {len(filename)} characters, and a document's id "
                                   f"(its path, unless its front-matter gives an id:) is at most {MAX_ID_CHARS}")
    offset = front.content_offset
    content = raw[offset:]
    content_sha = source_sha if offset == 0 else hashlib.sha256(content).hexdigest()
    doc = Document(dataset=dataset, id=front.id or filename, filename=filename, tags=front.tags,
                   content_sha256=content_sha, source_path=source_path,
                   source_sha256=source_sha, content_offset=offset, content_bytes=len(content))
    return LoadedDocument(document=doc, text=text[front.content_chars:])
