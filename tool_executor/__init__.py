"""The tool-call path: checks, hooks, approval, receipts, locks, dispatch, one result shape."""

from tool_executor.approval import ApprovalAnswer, ApprovalRequest, Approver, OnAsk
from tool_executor.builtin import builtin_tools
from tool_executor.executor import BatchRun, CallEnv, Checked, Decision, ToolCallProcessor
from tool_executor.locks import LockTimeout, ResourceLocks
from tool_executor.middleware import DEFAULT_MIDDLEWARE, Middleware, Rewrite
from tool_executor.record import CallTrace, Recorder, Step
from tool_executor.verdicts import Ask, Deny, Pass, Verdict

__all__ = [
    "DEFAULT_MIDDLEWARE",
    "ApprovalAnswer",
    "ApprovalRequest",
    "Approver",
    "Ask",
    "BatchRun",
    "CallEnv",
    "CallTrace",
    "Checked",
    "Decision",
    "Deny",
    "LockTimeout",
    "Middleware",
    "OnAsk",
    "Pass",
    "Recorder",
    "ResourceLocks",
    "Rewrite",
    "Step",
    "ToolCallProcessor",
    "Verdict",
    "builtin_tools",
]
