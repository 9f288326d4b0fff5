"""A throwaway set of config locations for one test: Strata home, $XDG_CONFIG_HOME and a workspace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from config import LoadedConfig, load_config


@dataclass(frozen=True)
class Layout:
    root: Path

    @classmethod
    def make(cls, tmp_path: Path) -> Layout:
        layout = cls(tmp_path)
        for d in (layout.home, layout.xdg, layout.workspace):
            d.mkdir(parents=True, exist_ok=True)
        return layout

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def xdg(self) -> Path:
        return self.root / "xdg"

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    @property
    def user_file(self) -> Path:
        return self.xdg / "strata" / "config.toml"

    @property
    def project_file(self) -> Path:
        return self.workspace.resolve() / ".strata" / "config.toml"

    def env(self, **extra: str) -> dict[str, str]:
        return {"STRATA_HOME": str(self.home), "XDG_CONFIG_HOME": str(self.xdg), "HOME": str(self.root), **extra}

    def write_user(self, text: str) -> Path:
        return _write(self.user_file, text)

    def write_project(self, text: str) -> Path:
        return _write(self.project_file, text)

    def load(self, *, flags: dict[str, object] | None = None, **env: str) -> LoadedConfig:
        return load_config(workspace=self.workspace, env=self.env(**env), flags=flags)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


PROJECT_WITH_EVERYTHING = """\
max_turns = 7

[[policy.rules]]
tool = "bash"
args = { command = "git *" }
action = "allow"

[[policy.rules]]
tool = "bash"
pattern = "rm *"
action = "deny"

[[policy.rules]]
tool = "write_*"
action = "ask"

[[hooks.pre_tool_use]]
matcher = "write_*"
command = "python3 check.py"
timeout_s = 5

[[hooks.stop]]
command = "make test"
"""
