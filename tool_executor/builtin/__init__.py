"""The built-in tools."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tool_executor.builtin import fs, shell
from tool_executor.checks.schema import trust_builtin as _trust_builtin

if TYPE_CHECKING:
    from core.tools import ToolSpec


def builtin_tools() -> list[ToolSpec]:
    tools = [*fs.fs_tools(), *shell.shell_tools()]
    _trust_builtin(tools)  # their schemas are checked by the test suite (tool_executor/checks/schema.py)
    return tools


__all__ = ["builtin_tools"]
