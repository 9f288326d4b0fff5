"""Hook contracts shared by the executor (PreToolUse, PostToolUse) and verify (Stop)."""

from core.hooks.types import (
    Hook,
    HookAddContext,
    HookAllow,
    HookAsk,
    HookBlock,
    HookEvent,
    HookRepair,
    HookRewrite,
    HookSet,
    HookWithhold,
    PostToolUseInput,
    PostToolUseVerdict,
    PreToolUseInput,
    PreToolUseVerdict,
    StopInput,
    StopVerdict,
)

__all__ = [
    "Hook",
    "HookAddContext",
    "HookAllow",
    "HookAsk",
    "HookBlock",
    "HookEvent",
    "HookRepair",
    "HookRewrite",
    "HookSet",
    "HookWithhold",
    "PostToolUseInput",
    "PostToolUseVerdict",
    "PreToolUseInput",
    "PreToolUseVerdict",
    "StopInput",
    "StopVerdict",
]
