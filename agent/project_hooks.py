"""A session's trusted project hooks across runs. A session records the digest of the trusted project hooks it
starts with (`SessionStarted.project_hooks_digest`); each resume records the digest it continues with. A resume
that would continue without them (the project file was edited, so its hooks would be ignored; it is no longer
trusted; or a file they run changed, so they would refuse to run) is refused: blocking hooks must not disappear
because the agent added a comment to the config. Two ways on, both a person's: trust the project again after
reviewing it (`strata trust DIR`), or resume with `--without-project-hooks`, which the session records with who
chose it."""

from __future__ import annotations

from pathlib import Path

from config import FileProblem, LoadedConfig, TrustState, project_config_path
from core.errors import ProjectHooksMissing
from core.hooks import HookSet
from core.record import record


@record
class ProjectHooks:
    """The workspace's project hooks as this process's config sees them."""

    digest: str | None = None
    """Of the active (trusted) project hooks; None when there are none."""
    project_file: Path | None = None
    """Where the project file is (or would be)."""
    exists: bool = False
    trust: TrustState | None = None
    problem: FileProblem | None = None
    """Why the trusted hooks would refuse to run now."""
    trust_command: str = "strata trust DIR"

    @classmethod
    def from_config(cls, loaded: LoadedConfig) -> ProjectHooks:
        where = loaded.project_file
        if where is None and loaded.project_root is not None:
            where = project_config_path(loaded.project_root)
        return cls(digest=loaded.project_hooks_digest, project_file=where, exists=loaded.project_file is not None,
                   trust=loaded.project_trust, problem=loaded.project_hooks_problem,
                   trust_command=loaded.trust_command)

    def without(self, hooks: HookSet) -> HookSet:
        """`hooks` less the project file's."""
        source = str(self.project_file) if self.project_file is not None else None
        return HookSet(tuple(h for h in hooks.hooks if source is None or h.source != source))


def resume_refusal(session_id: str, recorded: str | None, now: ProjectHooks) -> ProjectHooksMissing | None:
    """Why a session whose last run had the trusted project hooks `recorded` must not resume with `now`, or None.
    A project trusted now is the person's word, even for hooks that differ from the recorded ones (they trusted
    them since); so is a session that had no project hooks."""
    if recorded is None:
        return None
    if now.trust == "trusted" and now.problem is None:
        return None
    where = str(now.project_file) if now.project_file is not None else "the project's .strata/config.toml"
    if not now.exists:
        why = f"{where} is gone, so they would not run"
    elif now.trust == "changed":
        why = f"{where} changed since it was trusted, so they would be ignored"
    elif now.trust != "trusted":
        why = f"{where} is no longer trusted, so they would be ignored"
    else:
        assert now.problem is not None
        why = f"they would refuse to run: {now.problem.text()}"
    return ProjectHooksMissing(
        f"session {session_id} started with the trusted hooks of {where}, but {why}; it does not continue without "
        "them", session_id=session_id, project_file=where,
        hint=f"review the project and run `{now.trust_command}`, or resume with --without-project-hooks to continue "
             "without them (the session records that you chose so)")
