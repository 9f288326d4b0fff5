"""Which paths a tool that walks the workspace (grep, glob, list_dir) must not open or name.

A deny or ask rule on paths (`--deny 'grep(secrets/*)'`) is checked by the policy step against the paths a call
names. A recursive search also reads paths the call never named, so the policy step turns the rules that apply to
the call into a `PathFilter` (tool_executor/checks/policy.py decides which globs apply; this module decides how a
path meets a glob, for both) and the handler asks it about every entry before it reads or lists it.

A path meets a glob in the same forms as a path argument does: workspace-relative and absolute, of the path as
walked and of the path it resolves to (symlinks followed), so a link to `secrets/key` is skipped like the file."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from core.record import record


def path_forms(resolved: Path, root: Path) -> list[str]:
    """The forms a rule's glob is matched against: the workspace-relative path (`.` for the root) and the absolute
    one. `resolved` and `root` are absolute and `resolved` lies in `root`."""
    rel = "." if resolved == root else str(resolved.relative_to(root))
    return [rel, str(resolved)]


def any_form_matches(forms: list[str], glob: str) -> bool:
    return any(fnmatch.fnmatchcase(form, glob) for form in forms)


@record
class PathFilter:
    """The path globs of the deny and ask rules that apply to one call, and the workspace they are relative to."""

    root: Path
    """The workspace, absolute with symlinks resolved."""
    globs: tuple[str, ...]
    rules: tuple[str, ...] = ()
    """The rules the globs come from, for messages (`deny rule 'grep(secrets/*)' (flag)`)."""

    def skips(self, path: Path) -> bool:
        """True when `path` (absolute, under the workspace) or where it leads matches one of the globs."""
        forms: list[str] = []
        for candidate in (path, Path(os.path.realpath(path))):
            if candidate == self.root or self.root in candidate.parents:
                forms.extend(path_forms(candidate, self.root))
        return any(any_form_matches(forms, glob) for glob in self.globs)


def skipped_note(count: int, path_filter: PathFilter | None) -> str:
    """The line a walking tool adds when the filter kept paths from it: the same words everywhere, and the rules."""
    rules = f": {'; '.join(path_filter.rules)}" if path_filter is not None and path_filter.rules else ""
    return f"[{count} path{'s' if count != 1 else ''} skipped by policy rules{rules}]"
