"""ConfigFile's tables are validated by their own validators, built when a file holds the table, and a table of
empty arrays by none (config/schema.py `_OwnValidator`, `_empty_arrays`): what a file reads as, and every error
it gets, are what validating the table with its own model gives."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from config.channels import ChannelEntry, DaemonSection
from config.schema import ConfigFile, HooksSection, PolicySection, SecretsSection
from config.tables import KnowledgeSection, McpSection, ToolEntry

_TABLES: dict[str, Any] = {
    "policy": PolicySection, "hooks": HooksSection, "secrets": SecretsSection, "knowledge": KnowledgeSection,
    "mcp": McpSection, "daemon": DaemonSection | None, "channels": list[ChannelEntry] | None,
    "tools": dict[str, ToolEntry],
}

_CASES = [
    ("policy", {}), ("policy", {"rules": []}), ("policy", {"rules": [], "extra": []}), ("policy", {"rules": {}}),
    ("policy", {"rules": ()}), ("policy", []), ("policy", {"rules": [{"tool": "bash", "action": "allow"}]}),
    ("policy", {"rules": [{"tool": "bash", "action": "maybe"}]}),
    ("hooks", {"pre_tool_use": [], "post_tool_use": [], "stop": []}), ("hooks", {"stop": [{"command": ""}]}),
    ("hooks", {"observe": [{"command": "x", "env": ["A", "1B"]}]}), ("hooks", {"stop": None}),
    ("secrets", {"values": [], "env": []}), ("secrets", {"values": ["abc"]}), ("secrets", {"env": ["NAME"]}),
    ("knowledge", {}), ("knowledge", {"common_term_share": 2}), ("knowledge", {"datasets": {"d": {"modes": []}}}),
    ("knowledge", {"datasets": {"d": {"modes": ["headless", "headless"]}}}),
    ("mcp", {"servers": {}}), ("mcp", {"servers": {"a": {"url": "ftp://x"}}}), ("mcp", 3),
    ("daemon", {"turn_budget_s": 0}), ("daemon", {"enable": []}), ("daemon", {"max_workers": 0}),
    ("daemon", {"max_workers": 8}), ("channels", []), ("channels", [3]),
    ("channels", [{"name": "a", "kind": "spool", "workspace": "/w", "inbox": "/i", "outbox": "/o"}]),
    ("tools", {"bash": {"timeout_s": 5}}), ("tools", {"bash": {"timeout_s": -1}}), ("tools", []),
]


def _plain(errors: Any) -> list[dict[str, Any]]:
    """Errors comparable: the exception a validator raised (in `ctx`) by its text."""
    return [{**e, "ctx": {k: str(v) for k, v in e.get("ctx", {}).items()}} for e in errors]


def _strict(annotation: Any) -> TypeAdapter[Any]:
    model = isinstance(annotation, type) and issubclass(annotation, BaseModel)
    return TypeAdapter(annotation) if model else TypeAdapter(annotation, config={"strict": True})


@pytest.mark.parametrize(("key", "table"), _CASES)
def test_a_table_reads_as_its_own_model_reads_it_and_fails_with_its_errors_under_its_key(key: str, table: Any) -> None:
    try:
        expected = _strict(_TABLES[key]).validate_python(table)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as raised:
            ConfigFile.model_validate({key: table})
        inner = [{**e, "loc": (key, *e["loc"])} for e in exc.errors(include_url=False)]
        assert _plain(raised.value.errors(include_url=False)) == _plain(inner)
        return
    got = getattr(ConfigFile.model_validate({key: table}), key)
    assert got == expected and type(got) is type(expected)
    if isinstance(expected, BaseModel):
        assert got.model_fields_set == expected.model_fields_set


def test_tables_a_file_leaves_out_are_what_their_models_make_of_nothing() -> None:
    empty = ConfigFile.model_validate({})
    for key, model in (("policy", PolicySection), ("hooks", HooksSection), ("secrets", SecretsSection)):
        made = getattr(empty, key)
        assert made == model() and made.model_fields_set == set()
    assert empty.tools == {} and empty.channels is None and empty.daemon is None
    assert empty.knowledge is None and empty.mcp is None  # config/tables.py's: the loader reads None as empty
