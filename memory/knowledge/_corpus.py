"""Reading a corpus from disk: every document file under each dataset's roots, read once, bound to its bytes.

Walks each root in sorted order without following symlinks (a symlink is reported `not_followed`, so a dataset
never reaches outside its root in silence) and skips hidden entries (`.git/`, `.DS_Store`). Only files with a
document suffix (core/knowledge DOCUMENT_SUFFIXES) are read; each is opened only when it is a regular file (a FIFO
or a device is reported, never opened: opening a FIFO would release a process waiting to write to it), without
following a symlink and without blocking (what was swapped in after that check is reported too, never waited on).
A file that cannot be indexed is reported, never dropped in silence (core/knowledge/_document.py). Blocking: call
it from a worker thread in async code.

A root given as a symlink is followed (a person's `path = "~/sops"` may lead anywhere they chose, even when it lies
inside the workspace, as `~/.local/share/strata/knowledge` does in a workspace of $HOME), except a root the project
supplies (config/knowledge.py `project_roots`: `.strata/knowledge/NAME`, or a project file's `path`), whose files
come with the checkout: one that resolves outside the workspace (the directory, or one above it, a symlink to
elsewhere) is reported `not_followed` and never read."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from core.knowledge import (
    DOCUMENT_SUFFIXES,
    MAX_DOCUMENT_BYTES,
    Corpus,
    CorpusProblem,
    LoadedDocument,
    ProblemKind,
    build_corpus,
    read_document,
)
from core.utf8 import valid_text


def load_corpus(roots: Mapping[str, tuple[Path, ...]], *, workspace: Path | None = None,
                project_roots: Collection[Path] = ()) -> Corpus:
    """The corpus of the datasets in `roots` (dataset -> root directories, config/knowledge.py dataset_roots); a
    root the project supplies (`project_roots`) is read only where it resolves inside `workspace`."""
    loaded: list[LoadedDocument] = []
    problems: list[CorpusProblem] = []
    shown: dict[str, tuple[str, ...]] = {}
    for dataset in sorted(roots):
        shown[dataset] = tuple(str(_absolute(r)) for r in roots[dataset])
        for given in roots[dataset]:
            root = _absolute(given)
            if workspace is not None and given in project_roots and (escape := _escape(root, workspace)) is not None:
                problems.append(CorpusProblem(dataset=dataset, kind="not_followed", source_path=valid_text(str(root)),
                                              detail=f"the dataset's directory is in the workspace but leads out "
                                                     f"of the workspace (to {valid_text(escape)})"))
                continue
            _walk(dataset, root, loaded, problems)
    return build_corpus(shown, loaded, problems)


def _escape(root: Path, workspace: Path) -> str | None:
    """Where `root` really is, when it is inside `workspace` (as written, or with the workspace's own symlinks
    resolved) but resolves outside it; None otherwise."""
    spelled, real_ws = _absolute(workspace), os.path.realpath(_absolute(workspace))
    if not (root.is_relative_to(spelled) or root.is_relative_to(real_ws)):
        return None
    real = os.path.realpath(root)
    return None if Path(real).is_relative_to(real_ws) else real


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path.expanduser()))


def _walk(dataset: str, root: Path, loaded: list[LoadedDocument], problems: list[CorpusProblem]) -> None:
    def report(kind: ProblemKind, path: str, detail: str) -> None:
        problems.append(CorpusProblem(dataset=dataset, kind=kind, source_path=valid_text(path),
                                      detail=detail))

    try:
        st = os.lstat(root)
    except OSError as exc:
        report("missing_root", str(root), f"the dataset's directory cannot be read: {exc.strerror or exc}")
        return
    if stat.S_ISLNK(st.st_mode):
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            report("missing_root", str(root), "the dataset's directory is a symlink to something that is not one")
            return
    elif not stat.S_ISDIR(st.st_mode):
        report("missing_root", str(root), "the dataset's path is not a directory")
        return

    # Depth first in sorted order, with a stack of its own: however deep the tree, no recursion (os.walk's
    # recursion ends in a RecursionError about a thousand directories down).
    stack = [root]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as err:
            report("unreadable", str(here), f"cannot list the directory: {err.strerror or err}")
            continue
        subdirs: list[Path] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = here / entry.name
            if _is_dir(entry):
                if entry.is_symlink():
                    report("not_followed", str(path), "a symlinked directory is not followed")
                else:
                    subdirs.append(path)
                continue
            if not entry.name.lower().endswith(DOCUMENT_SUFFIXES):
                continue
            item = _read(dataset, path.relative_to(root).as_posix(), path)
            (loaded if isinstance(item, LoadedDocument) else problems).append(item)  # type: ignore[arg-type]
        stack.extend(reversed(subdirs))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """A directory, or a symlink to one (reported, not followed); one that cannot be told is taken as a file."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _read(dataset: str, filename: str, path: Path) -> LoadedDocument | CorpusProblem:
    shown = valid_text(str(path))

    def problem(kind: ProblemKind, detail: str) -> CorpusProblem:
        return CorpusProblem(dataset=dataset, kind=kind, source_path=shown, id=valid_text(filename),
                             detail=detail)

    if shown != str(path):
        return problem("bad_name", "the path is not valid UTF-8")
    try:  # never open what is not a regular file: opening a FIFO releases a writer, a device may act on it
        seen = os.lstat(path)
    except OSError as exc:
        return problem("unreadable", f"cannot open: {exc.strerror or exc}")
    if stat.S_ISLNK(seen.st_mode):
        return problem("not_followed", "a symlinked file is not followed")
    if not stat.S_ISREG(seen.st_mode):
        return problem("unreadable", "not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if os.path.islink(path):
            return problem("not_followed", "a symlinked file is not followed")
        return problem("unreadable", f"cannot open: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return problem("unreadable", "not a regular file")
        if st.st_size > MAX_DOCUMENT_BYTES:
            return problem("too_large", f"{st.st_size} bytes (at most {MAX_DOCUMENT_BYTES})")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_DOCUMENT_BYTES:
                return problem("too_large", f"over {MAX_DOCUMENT_BYTES} bytes")
        raw = b"".join(chunks)
    except OSError as exc:
        return problem("unreadable", f"cannot read: {exc.strerror or exc}")
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return read_document(dataset, filename, str(path), raw)
