"""What a channel's folders keep, and for how long: each prune runs when the daemon starts and every
`PRUNE_INTERVAL_S` after (a failed one is logged and tried again then), as the webhook's `ids/` prune does.

- Replies (a spool's outbox, a webhook's `out/` and their `delivered/` markers): a reply written more than
  `keep_replies_days` ago goes once nothing needs it any more. Its message must be acknowledged in the channel book
  (a message not yet `acked` is redelivered, and whether its reply exists decides that it is not run again); its
  session must have no uncertain `reply` effect (the probe that settles one asks whether the reply exists: gone, it
  would say "not sent", and the reply be sent again); on a webhook it must have been taken (posted to the
  callback, or fetched with GET) and its id's record (`ids/`) be gone (while the record is kept, a retry of the
  message is answered 202 with the reply's address, and that reply must be there). A reply's `delivered/` markers
  go right after it (a marker without its reply, a crash's leftover, goes too): never before, or the deliverer
  would post the reply again.
- Rejected files (`rejected/`, `in/rejected/`): a file and its `.error` go `keep_rejected_days` after the file was
  set aside (the `.error`'s time; a file without one, by when it was moved there)."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
import structlog

from agent.channels._spool import REJECTED, SpoolChannel, _one_line
from core.errors import StrataError
from memory.channel_book import ChannelBook
from memory.store import EventStore

log = structlog.get_logger("strata.channels")

PRUNE_INTERVAL_S = 3600.0
DAY_S = 86400.0
ERROR_SUFFIX = ".error"
REPLY_TOOL = "reply"  # agent/channels/_reply_tool.py (imported there from here would make a circle)


Prune = tuple[str, Callable[[], Awaitable[dict[str, int]]], dict[str, object]]
"""One prune a channel runs: what it prunes (for the log), the prune (how many of each went), what to log with it."""


async def every(interval_s: float, channel: str, prunes: Sequence[Prune]) -> None:
    """Run the prunes in order now and every `interval_s` for ever (in order: the webhook's `ids/` before its
    replies, whose removal waits for their records to go); a failed one is logged and tried again then."""
    while True:
        for what, prune, about in prunes:
            try:
                removed = await prune()
            except Exception as exc:  # a folder or the store unusable now, or a bug: logged, never fatal
                log.warning(f"{what} not pruned", channel=channel, error_type=type(exc).__name__,
                            reason=_one_line(exc), exc_info=not isinstance(exc, OSError | StrataError))
            else:
                if any(removed.values()):
                    log.info(f"{what} pruned", channel=channel, **removed, **about)
        await anyio.sleep(interval_s)


async def prune_files(channel: SpoolChannel, book: ChannelBook, store: EventStore, *, keep_replies_days: int,
                      keep_rejected_days: int) -> dict[str, int]:
    """One prune of the channel's replies and rejected files; how many of each went."""
    now = time.time()
    replies = await prune_replies(channel, book, store, now - keep_replies_days * DAY_S)
    markers = await anyio.to_thread.run_sync(channel.prune_markers, now - keep_replies_days * DAY_S)
    rejected = await anyio.to_thread.run_sync(prune_rejected, channel.inbox / REJECTED,
                                              now - keep_rejected_days * DAY_S)
    return {"replies": replies, "markers": markers, "rejected": rejected}


async def prune_replies(channel: SpoolChannel, book: ChannelBook, store: EventStore, cutoff: float) -> int:
    """Remove the replies written before `cutoff` that nothing needs (see the module's note); how many."""
    unsure: dict[str, bool] = {}
    removed = 0
    for reply in await anyio.to_thread.run_sync(channel.old_replies, cutoff):
        row = await anyio.to_thread.run_sync(book.intake, channel.name, reply.message_id)
        if row is None or row.status != "acked" or row.reply_key != reply.key:
            continue
        if row.session_id not in unsure:
            unsure[row.session_id] = await _uncertain_reply(store, row.session_id)
        if unsure[row.session_id]:
            continue
        if await anyio.to_thread.run_sync(channel.drop_reply, reply):
            removed += 1
    return removed


async def _uncertain_reply(store: EventStore, session_id: str) -> bool:
    """Whether the session has a `reply` effect whose outcome is not settled (its probe reads the outbox)."""
    for status in ("unknown", "dispatched"):
        if any(r.tool == REPLY_TOOL for r in await store.list_receipts(session_id, status=status)):
            return True
    return False


def prune_rejected(folder: Path, cutoff: float) -> int:
    """Remove the rejected files set aside before `cutoff`, each with its `.error`; how many files went. A file's
    time is its `.error`'s (written when it was set aside; the file itself keeps its writer's times), else when it
    was moved there (its inode's change time)."""
    try:
        with os.scandir(folder) as entries:
            names = {e.name for e in entries if not e.name.startswith(".")}
    except FileNotFoundError:
        return 0
    removed = 0
    for name in sorted(names):
        if name.endswith(ERROR_SUFFIX) and name.removesuffix(ERROR_SUFFIX) in names:
            continue  # goes with its file
        path = folder / name
        error = folder / (name + ERROR_SUFFIX)
        try:
            info = path.lstat()
            when = error.lstat().st_mtime if name + ERROR_SUFFIX in names else max(info.st_mtime, info.st_ctime)
        except FileNotFoundError:
            continue
        if when >= cutoff or stat.S_ISDIR(info.st_mode):  # a folder is no rejected message: someone else's
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed += 1
        with contextlib.suppress(FileNotFoundError):
            error.unlink()
    return removed
