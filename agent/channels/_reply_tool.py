"""The `reply` tool of a channel's sessions: the model answers the message its turn handles through the tool-call
path, as an effect with a receipt. The reply is named by the message's idempotency key (`reply-` + sha256 of
channel and message id), so the outbox (or the callback) takes at most one reply a message, however often the
call is made or retried; the probe of an unknown outcome asks the channel whether that key was delivered.

A channel session that ends its turn without calling `reply` still gets one: the daemon sends the turn's last
text under the same key (agent/channels/_turns.py), which the outbox refuses when the tool already replied."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from agent.channels._messages import Channel, InboundMessage, Reply
from core.policy import PermissionRule
from core.tools import ProbeResult, ToolContext, ToolError, ToolOutput, ToolSpec
from memory.channel_book import ChannelBook, TaskRow

REPLY_TOOL = "reply"

Current = dict[str, tuple[InboundMessage, TaskRow | None]]
"""Session id -> the message its running turn handles (and the task it made), kept by the channel's worker."""


def reply_rule(channel: str) -> PermissionRule:
    """The channel's own door: its sessions may always reply on it (a user's deny rule still beats this)."""
    return PermissionRule(action="allow", tool=REPLY_TOOL, source=f"channel {channel}")


def reply_tool(channel: Channel, book: ChannelBook, current: Current) -> ToolSpec:
    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> ToolOutput:
        handled = current.get(ctx.session_id)
        if handled is None:
            raise ToolError("no channel message is being answered in this session now; nothing was sent")
        message, task = handled
        reply = Reply(key=message.reply_key, channel=message.channel, thread=message.thread, in_reply_to=message.id,
                      session_id=ctx.session_id, status="completed", text=str(args["text"]),
                      task_id=task.id if task else None)
        if await anyio.to_thread.run_sync(channel.sent, reply.key):
            return ToolOutput(f"message {message.id} has its reply already ({reply.key}); nothing more was sent")
        await anyio.to_thread.run_sync(channel.send, reply)
        return ToolOutput(f"replied to message {message.id} on thread {message.thread} ({reply.key})")

    async def probe(args: Mapping[str, Any], ctx: ToolContext) -> ProbeResult:
        rows = [r for r in await anyio.to_thread.run_sync(book.intakes, channel.name) if r.session_id == ctx.session_id]
        if not rows:
            return ProbeResult("undecided", "the channel book has no message of this session")
        key = rows[-1].reply_key
        if await anyio.to_thread.run_sync(channel.sent, key):
            return ProbeResult("applied", f"the reply {key} is in the channel's outbox")
        return ProbeResult("not_applied", f"the channel has no reply {key}")

    schema = {"type": "object", "additionalProperties": False, "required": ["text"],
              "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 100_000,
                                      "description": "the answer to the message, as its sender will read it"}}}
    return ToolSpec(REPLY_TOOL, "Reply on the channel thread to the message this turn handles (once a message).",
                    schema, handler, safety="network", effect="effectful", pii="internal", timeout_s=30,
                    probe=probe, passed_down=False)
