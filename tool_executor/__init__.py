"""The tool-call path: checks, receipts, dispatch, one result shape."""

from tool_executor.builtin import builtin_tools
from tool_executor.executor import Decision, ToolCallProcessor
from tool_executor.verdicts import Deny, Pass, Verdict

__all__ = ["Decision", "Deny", "Pass", "ToolCallProcessor", "Verdict", "builtin_tools"]
