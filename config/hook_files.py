"""What a trusted project's hooks execute, and whether it is still what the person trusted.

Trusting `.strata/config.toml` by its sha256 says nothing about the scripts its hooks run, and those live in the
workspace the model writes to. So `strata trust` also fingerprints every file the hooks may execute from the
workspace: each word of a hook command that names a file inside the workspace (`python3 .strata/check.py`,
`./hooks/guard.sh`, the value of `--config=lint.toml`; every file under a named directory with a `__main__.py`,
which `python3 DIR` runs as a program with `DIR` on its import path), and every file under the project's
`.strata/` directory (which catches a module planted beside a hook script, or a file the script sources without
naming it on the command line). Before each run of one of the project's hooks, `HookFiles.check` compares the
workspace with that record; any difference (a changed, new or removed file) means the hook must not run, and it
fails closed with a reason naming the file and the command that re-trusts the project.

A check costs a few `stat` calls when nothing changed: a file is hashed again only when its inode, size, mtime
or ctime moved (ctime cannot be set back by a process, so `touch -r` does not hide an edit).

Knowledge documents are not covered by the `.strata/` rule: a Markdown or text file under `.strata/knowledge/`
(core/knowledge DOCUMENT_SUFFIXES) is data the knowledge tools serve, never code a hook executes, and editing a
procedure must not make every hook of the project fail closed. What a session read of them is bound to their bytes
instead: its manifest digest is recorded when it starts and resumes, every hit carries the document's sha256,
and a changed corpus is recorded and told to the model (agent/knowledge.py). A knowledge file a hook command
names is covered as any named file is; any other file under `.strata/knowledge/` (a script) is covered.

Not covered: files a hook reads without naming them outside `.strata/` (a Makefile behind `make test`, a
library under `node_modules`, Python's site-packages), files outside the workspace (the agent's file tools
cannot write them; a `bash` command can), and a file changed between the check and the hook reading it."""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import stat
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal, assert_never

from config.locations import PROJECT_DIR
from core.errors import ConfigError
from core.knowledge._names import DOCUMENT_SUFFIXES
from core.record import record

KNOWLEDGE_PREFIX = f"{PROJECT_DIR}/knowledge/"
PROGRAM_MAIN = "__main__.py"
"""What Python runs of a directory it is given as its program."""

MAX_FILES = 1000
"""Files under `.strata/` trust will fingerprint: more is refused at `strata trust` (keep generated data out)."""
MAX_FILE_BYTES = 16 * 1024 * 1024
"""A larger file is refused at `strata trust`, and reads as changed at a check (it is not hashed then)."""

_StatKey = tuple[int, int, int, int, int]


class TooMuch(ValueError):
    """More files, or a larger one, than trust fingerprints."""


def shell_words(command: str) -> list[str]:
    """The command's words after shell unquoting, with operators (`;`, `|`, `>`, ...) split off; a command the
    lexer cannot read (an unclosed quote) is split on whitespace. A reading, not a shell: expansions stay as
    written."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return command.split()


@functools.lru_cache(maxsize=256)
def named_paths(command: str, root: str | Path) -> tuple[str, ...]:
    """Workspace-relative paths (POSIX spelling, not resolved) of the words of `command` that lie inside `root`:
    each word, and the value of a `NAME=value` or `--option=value` word. Whether a file is there is not asked."""
    found: dict[str, None] = {}
    for word in shell_words(command):
        for part in (word, word.partition("=")[2]):
            if not part or part.startswith("~") or "\x00" in part:
                continue
            joined = os.path.normpath(part if os.path.isabs(part) else os.path.join(root, part))
            rel = os.path.relpath(joined, root)
            if rel != "." and not rel.startswith(".." + os.sep) and rel != "..":
                found[Path(rel).as_posix()] = None
    return tuple(found)


def _stat_key(st: os.stat_result) -> _StatKey:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Fingerprints:
    """Fingerprints of paths, remembered by their stat identity: an unchanged file is not read again."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[_StatKey, ...], str | None]] = {}

    def of(self, path: str, *, strict: bool = False) -> str | None:
        """`sha256:<hex>` of a regular file's bytes; a symlink adds its target (`symlink <target> -> ...`); a
        directory is `directory`, anything else `special`; None when nothing is there. A file over
        MAX_FILE_BYTES raises TooMuch when `strict`, else reads as `too large` (never equal to a record)."""
        try:
            lst = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        keys: tuple[_StatKey, ...] = (_stat_key(lst),)
        target = None
        st: os.stat_result | None = lst
        if stat.S_ISLNK(lst.st_mode):
            target = os.readlink(path)
            try:
                st = os.stat(path)
                keys += (_stat_key(st),)
            except OSError:
                st = None
        hit = self._seen.get(path)
        if hit is not None and hit[0] == keys:
            return hit[1]
        inner = "dangling" if st is None else self._content(path, st, strict)
        value = inner if target is None else f"symlink {target} -> {inner}"
        self._seen[path] = (keys, value)
        return value

    @staticmethod
    def _content(path: str, st: os.stat_result, strict: bool) -> str:
        if stat.S_ISDIR(st.st_mode):
            return "directory"
        if not stat.S_ISREG(st.st_mode):
            return "special"  # a FIFO or a device: never opened (a read could block for ever)
        if st.st_size > MAX_FILE_BYTES:
            if strict:
                raise TooMuch(f"{path} is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
            return "too large"
        # Non-blocking, and checked again once open: a FIFO swapped in after the stat must not hang the check.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return "special"
            digest = hashlib.sha256()
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
        return f"sha256:{digest.hexdigest()}"


def _tree(root: str, top: str = PROJECT_DIR) -> list[str]:
    """Workspace-relative paths of everything under `<root>/<top>/` (default `.strata/`) that is not a directory
    one can descend into (files, symlinks of any kind, special files), sorted. Raises TooMuch past MAX_FILES. Plain
    strings and `os.scandir`: this runs before every hook."""
    found: list[str] = []
    pending = [top]
    while pending:
        rel_dir = pending.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir)) as entries:
                for entry in entries:
                    rel = f"{rel_dir}/{entry.name}"
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(rel)  # a symlink to a directory is listed as itself, never followed
                    elif not knowledge_document(rel):
                        found.append(rel)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if len(found) > MAX_FILES:
            raise TooMuch(f"more than {MAX_FILES} files under {os.path.join(root, top)}")
    found.sort()
    return found


def program_directory(root: str, rel: str) -> bool:
    """Whether the named `rel` is a directory Python runs as a program (`python3 guard` runs `guard/__main__.py`,
    with `guard/` first on its import path): then every file under it is code the hook executes."""
    return os.path.isdir(os.path.join(root, rel)) and os.path.lexists(os.path.join(root, rel, PROGRAM_MAIN))


def knowledge_document(rel: str) -> bool:
    """A knowledge document under `.strata/knowledge/` (data, not covered by the `.strata/` rule)."""
    return rel.startswith(KNOWLEDGE_PREFIX) and rel.lower().endswith(DOCUMENT_SUFFIXES)


def covered_files(root: Path, commands: Iterable[str]) -> dict[str, str]:
    """At `strata trust`: workspace-relative path -> fingerprint of every file under `.strata/` and every file a
    hook command names inside the workspace. ConfigError when there is too much to cover."""
    prints = _Fingerprints()
    files: dict[str, str] = {}
    try:
        for rel in _tree(str(root)):
            fp = prints.of(os.path.join(root, rel), strict=True)
            if fp is not None:
                files[rel] = fp
        for command in commands:
            for rel in named_paths(command, root):
                fp = prints.of(os.path.join(root, rel), strict=True)
                if fp is not None and fp != "directory":
                    files[rel] = fp
                if program_directory(str(root), rel):
                    for inner in _tree(str(root), rel):
                        inner_fp = prints.of(os.path.join(root, inner), strict=True)
                        if inner_fp is not None:
                            files[inner] = inner_fp
    except TooMuch as exc:
        raise ConfigError(f"cannot cover what the hooks run: {exc}", file=str(root / PROJECT_DIR),
                          hint="keep only the config and hook scripts under .strata/") from None
    except OSError as exc:
        raise ConfigError(f"cannot read what the hooks run: {exc.strerror or exc} ({exc.filename})",
                          file=str(root / PROJECT_DIR)) from None
    return files


Change = Literal["changed", "added", "removed", "appeared", "unrecorded", "unreadable"]


@record
class FileProblem:
    """Why a trusted project's hooks must not run: which file, and what happened to it since the trust."""

    path: str
    """Workspace-relative, or the `.strata/` directory itself for a problem with the whole tree."""
    change: Change
    detail: str = ""

    def text(self) -> str:
        match self.change:
            case "changed":
                return f"{self.path} changed since the project was trusted"
            case "added":
                return f"{self.path} was added since the project was trusted (a hook could load it)"
            case "removed":
                return f"{self.path} was removed since the project was trusted"
            case "appeared":
                return f"{self.path}, named by a hook command, appeared since the project was trusted"
            case "unrecorded":
                return "the project was trusted before Strata recorded the files its hooks run"
            case "unreadable":
                return f"{self.path} cannot be checked: {self.detail}"
            case _:
                assert_never(self.change)


class HookFiles:
    """The check a trusted project's hooks run before each command: is every file they may execute from the
    workspace still the one the person trusted? Shared by the project's hooks (one stat cache); thread-safe, as
    hooks of calls running side by side check at once."""

    def __init__(self, root: Path, recorded: Mapping[str, str] | None, trust_command: str) -> None:
        self.root = str(root)
        self.recorded = None if recorded is None else dict(recorded)
        """None: trusted by a Strata that did not record the files (trust record version 1)."""
        self.trust_command = trust_command
        self._prints = _Fingerprints()
        self._lock = threading.Lock()

    def check(self, command: str) -> str | None:
        """Why `command` must not run now (with what to do about it), or None: a hook's precheck."""
        problem = self.problem((command,))
        if problem is None:
            return None
        return f"{problem.text()}; a person must review the project and run `{self.trust_command}` to trust it again"

    def problem(self, commands: Iterable[str]) -> FileProblem | None:
        """The first difference between the workspace and the record, for hooks running `commands`."""
        if self.recorded is None:
            return FileProblem(PROJECT_DIR, "unrecorded")
        with self._lock:
            try:
                return self._difference(commands, self.recorded)
            except TooMuch as exc:
                return FileProblem(PROJECT_DIR, "unreadable", str(exc))
            except OSError as exc:
                return FileProblem(str(exc.filename or PROJECT_DIR), "unreadable", exc.strerror or str(exc))

    def _difference(self, commands: Iterable[str], recorded: Mapping[str, str]) -> FileProblem | None:
        prefix = PROJECT_DIR + "/"
        # A record made before knowledge documents were left out may list some: they are not compared either.
        expected = {rel: fp for rel, fp in recorded.items() if rel.startswith(prefix) and not knowledge_document(rel)}
        for rel in _tree(self.root):
            fp = self._prints.of(os.path.join(self.root, rel))
            if fp is None:
                continue  # gone between the walk and the look: reported as removed below
            if rel not in expected:
                return FileProblem(rel, "added")
            if fp != expected.pop(rel):
                return FileProblem(rel, "changed")
        for rel in expected:
            return FileProblem(rel, "removed")
        for command in commands:
            for rel in named_paths(command, self.root):
                fp = self._prints.of(os.path.join(self.root, rel))
                if rel not in recorded:
                    if fp is not None and fp != "directory":
                        return FileProblem(rel, "appeared")
                elif fp is None:
                    return FileProblem(rel, "removed")
                elif fp != recorded[rel]:
                    return FileProblem(rel, "changed")
                leads_to_directory = fp is not None and fp.endswith("directory")  # itself, or through a link
                program = leads_to_directory or f"{rel}/{PROGRAM_MAIN}" in recorded
                if program and (problem := self._program_difference(rel, recorded)) is not None:
                    return problem
        return None

    def _program_difference(self, rel: str, recorded: Mapping[str, str]) -> FileProblem | None:
        """For a named directory Python would run as a program: a `__main__.py` that appeared since the trust, or
        any file under the directory changed, added or removed since then."""
        main = f"{rel}/{PROGRAM_MAIN}"
        if main not in recorded:
            return FileProblem(main, "appeared") if program_directory(self.root, rel) else None
        prefix = rel + "/"
        expected = {inner: fp for inner, fp in recorded.items() if inner.startswith(prefix)}
        for inner in _tree(self.root, rel):
            fp = self._prints.of(os.path.join(self.root, inner))
            if fp is None:
                continue  # gone between the walk and the look: reported as removed below
            if inner not in expected:
                return FileProblem(inner, "added")
            if fp != expected.pop(inner):
                return FileProblem(inner, "changed")
        for inner in expected:
            return FileProblem(inner, "removed")
        return None
