"""Parent and child sessions of delegation, read from the store: a child's row names its parent (`parent_id`) and
has no fork point (a fork's row has one, `fork_seq`); its `SessionStarted` names the parent's call, its depth and
its narrowed plan (`ChildLink`, recorded when it starts)."""

from __future__ import annotations

from core.record import record
from core.state import Grant
from memory import SessionRecord
from memory.store import EventStore
from observability.session_tree import children, depths, is_child, tree_order


@record
class ChildLink:
    """What a child session is started with besides what every session has."""

    session_id: str
    """Chosen before the child starts and recorded on the parent's delegate receipt (core/tools/delegate.py)."""
    parent_id: str
    parent_call_id: str
    depth: int
    tools_allowed: tuple[str, ...]
    grants: tuple[Grant, ...] = ()
    """The parent's "always" grants it starts with (setting `delegate_grants`; none by default)."""


async def children_of(store: EventStore, parent_id: str) -> list[SessionRecord]:
    return children(await store.list_sessions(), parent_id)


__all__ = ["ChildLink", "children", "children_of", "depths", "is_child", "tree_order"]
