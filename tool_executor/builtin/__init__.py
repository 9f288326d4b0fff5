"""The built-in tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tool_executor.builtin import fs, shell

if TYPE_CHECKING:
    from core.tools import ToolSpec


def builtin_tools() -> list[ToolSpec]:
    return [*fs.fs_tools(), *shell.shell_tools()]


__all__ = ["builtin_tools"]
