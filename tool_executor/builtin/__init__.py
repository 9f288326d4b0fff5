"""The built-in tools."""

from core.tools import ToolSpec
from tool_executor.builtin.fs import fs_tools
from tool_executor.builtin.shell import shell_tools


def builtin_tools() -> list[ToolSpec]:
    return [*fs_tools(), *shell_tools()]


__all__ = ["builtin_tools"]
