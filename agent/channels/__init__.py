"""Channels: where a serve daemon takes unattended work from. A channel delivers messages (channel, thread id,
message id, sender, text, attachments by name and sha256), is told when one is handled (acknowledged), and takes
the replies. Each (channel, thread) is one session for ever, run in DAEMON mode (no human: an `ask` is denied or
parked, execute and admin tools left out unless enabled, a time budget per message); every message is handled
exactly once across crashes (agent/channels/_turns.py)."""

from agent.channels._messages import AttachmentRef, Channel, InboundMessage, Reply, reply_key
from agent.channels._runner import ChannelRunner, open_channel
from agent.channels._spool import SpoolChannel
from agent.channels._turns import daemon_runtime
from agent.channels._webhook import WebhookChannel

__all__ = [
    "AttachmentRef",
    "Channel",
    "ChannelRunner",
    "InboundMessage",
    "Reply",
    "SpoolChannel",
    "WebhookChannel",
    "daemon_runtime",
    "open_channel",
    "reply_key",
]
