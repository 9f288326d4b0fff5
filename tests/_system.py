"""System programs some tests need (Chromium today, PostgreSQL next), found on PATH.

Where one is missing, a test that needs it skips with one reason that names the program and how to install it
(pytest prints skip reasons in its summary: `-rs` is in the project's addopts). Where it must not be missing (CI,
which installs it), an environment variable set to 1 turns that skip into a failure, so a broken install cannot
pass as a skip. One variable per program: `STRATA_REQUIRE_BROWSER` for Chromium, `STRATA_REQUIRE_POSTGRES` for
PostgreSQL."""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class SystemProgram:
    name: str
    """What it is called in messages."""
    commands: tuple[str, ...]
    """Executable names to look for on PATH, in order."""
    require_env: str
    """Set to 1 (CI does) and the program's absence fails the test instead of skipping it."""
    install: str
    """How to install it, for the skip or failure message."""

    also_in: tuple[str, ...] = ()
    """Directory globs searched after PATH (Debian keeps PostgreSQL's programs off PATH)."""

    def find(self) -> str | None:
        for command in self.commands:
            found = shutil.which(command)
            if found:
                return found
        for pattern in self.also_in:
            for folder in sorted(glob.glob(pattern), reverse=True):
                for command in self.commands:
                    found = shutil.which(command, path=folder)
                    if found:
                        return found
        return None

    def require(self) -> str:
        """The program's path; or skip (fail, where `require_env` is 1) saying it is missing."""
        found = self.find()
        if found is not None:
            return found
        missing = f"{self.name} is not installed (no {' or '.join(self.commands)} on PATH)"
        if os.environ.get(self.require_env) == "1":
            pytest.fail(f"{missing}, and {self.require_env}=1 requires it; install it: {self.install}")
        pytest.skip(f"{missing}; install it to run this test: {self.install} (CI sets {self.require_env}=1, "
                    "which makes its absence a failure)")


CHROMIUM = SystemProgram("Chromium", ("chromium", "chromium-browser"), "STRATA_REQUIRE_BROWSER",
                         "sudo apt-get install -y chromium")

POSTGRES = SystemProgram("PostgreSQL", ("initdb",), "STRATA_REQUIRE_POSTGRES",
                         "sudo apt-get install -y postgresql", also_in=("/usr/lib/postgresql/*/bin",))
"""Found by its `initdb`; `pg_ctl` is beside it."""

TMUX = SystemProgram("tmux", ("tmux",), "STRATA_REQUIRE_TMUX", "sudo apt-get install -y tmux")
"""The terminal multiplexer the chat-screen tests drive `strata chat` in (its screen is read back with colours)."""
