"""What a reading command (sessions, show, receipts, timeline, export) opens: the store read-only, the home's masker,
the clock, the log file, the stop signals. Nothing of a session's machinery (the loop, the executor, the tools and
their schemas, the hooks, the model SDKs), so such a command starts without importing any of it.

`reader(config)` opens exactly what `agent.session.runtime(config, read_only=True)` opens for these commands: the
database read-only, a home that cannot be written still serving (no masking key is created: a one-off key masks
instead) and the log on stderr without a warning. The composition root for sessions (agent/session.py) takes
`configured_secrets` and `recorded_workspace` from here, so both paths read a config the same way."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import anyio

from agent.ids import resolve_receipt, resolve_session
from agent.signals import StopSignal, stop_on_signals
from config import LoadedConfig, Settings
from config.seen_secrets import home_masker
from core.chain import ChainHead
from core.clock import Clock, SystemClock
from core.errors import UsageError
from core.masking import Masker
from core.record import record
from memory.opening import open_store
from memory.rows import Receipt
from memory.store import EventStore
from observability import attach_home

__all__ = ["Reader", "RecordedSession", "configured_secrets", "reader", "recorded_session", "recorded_workspace"]

@dataclass
class Reader:
    """The parts a reading command uses: the store (opened read-only), the clock, the home's masker, and the
    signal that stopped it, if one did."""

    store: EventStore
    clock: Clock
    masker: Masker
    home: Path
    stop: StopSignal

    def ledger_head(self, session_id: str) -> ChainHead | None:
        """The newest head the session's evidence ledger recorded (None: none). Imports the ledger only here:
        `strata timeline --verify` needs it, listing rows does not."""
        from agent.evidence_ledger import Ledgers
        from config.ledger_files import LEDGER_DIR

        return Ledgers(self.home / LEDGER_DIR, self.clock).last_head(session_id)


def configured_secrets(config: LoadedConfig) -> list[str]:
    """The secrets the config names: its values, the values of the environment variables it names, and the values
    it gives MCP servers' environments, and the store URL's password."""
    db_password = urlsplit(config.settings.db).password if config.settings.db else None
    return [*config.secrets.values, *(os.environ[n] for n in config.secrets.env if os.environ.get(n)),
            *config.mcp.secret_values(), *([db_password] if db_password else [])]


def reading_masker(config: LoadedConfig) -> Masker:
    """The home's masker as a reading command uses it: its key, the environment's, configured and remembered
    secrets; read-only (nothing is created in the home). Raises StrataError or OSError for an unreadable key."""
    return home_masker(config.settings.home, os.environ, extra_secrets=configured_secrets(config), read_only=True)


@asynccontextmanager
async def reader(config: LoadedConfig, clock: Clock | None = None) -> AsyncIterator[Reader]:
    """The reading parts built once from `config`: the database opened read-only, the home's masker (a one-off
    key when the home has none; nothing is created in the home), the log file masked by it (no warning when the
    home cannot take it), and SIGTERM / SIGHUP closing what runs as Ctrl-C does."""
    settings = config.settings
    clock = clock or SystemClock()
    store = await open_store(settings, clock=clock, read_only=True)
    try:
        masker = reading_masker(config)
        attach_home(settings.home, masker, quiet=True)  # the log file, masked by this home's key
        async with stop_on_signals() as stop:
            yield Reader(store=store, clock=clock, masker=masker, home=settings.home, stop=stop)
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()


@record
class RecordedSession:
    """The session a command names, resolved (agent/ids.py: a prefix, `last`), and the workspace it recorded; the
    receipt too when the command named one (by its id or its call's id)."""

    session_id: str
    workspace: Path
    receipt: Receipt | None = None


async def recorded_session(settings: Settings, *, session_ref: str | None = None,
                           receipt_ref: str | None = None) -> RecordedSession:
    """Resolve the session named (or the receipt's) and read the workspace it recorded, before a command builds its
    runtime: the session's project config is part of that runtime's config (its durability, secrets, hooks).
    SessionNotFound, ReceiptError or a UsageError (too short, ambiguous) when the reference names no one."""
    store = await open_store(settings, read_only=True)
    try:
        receipt = None
        if receipt_ref is not None:
            receipt = await resolve_receipt(store, receipt_ref)
            session_id = receipt.session_id
        elif session_ref is not None:
            session_id = await resolve_session(store, session_ref)
        else:
            raise UsageError("name a session or a receipt")
        workspace = Path((await store.get_session(session_id)).workspace)
        return RecordedSession(session_id, workspace, receipt)
    finally:
        with anyio.CancelScope(shield=True):
            await store.close()


async def recorded_workspace(settings: Settings, *, session_id: str | None = None,
                             receipt_id: str | None = None) -> Path:
    """The workspace a session recorded (the session named, or the receipt's; see `recorded_session`)."""
    return (await recorded_session(settings, session_ref=session_id, receipt_ref=receipt_id)).workspace
