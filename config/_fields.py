"""The field types and the table base that config/schema.py and config/tables.py share: kept apart so that
schema (which imports tables late, only for a file that holds one of its tables) and tables import them from here,
never each other round."""

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


def _command(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


def _env_name(value: str) -> str:
    if not _ENV_NAME.match(value):
        raise ValueError("not a valid environment variable name")
    return value


def _tool_name(value: str) -> str:
    if not _TOOL_NAME.match(value):
        raise ValueError("a tool name may use only letters, digits, '_', '.', ':' and '-'")
    return value


ArgName = Annotated[str, Field(min_length=1)]
Command = Annotated[str, AfterValidator(_command)]
EnvName = Annotated[str, AfterValidator(_env_name)]
ToolName = Annotated[str, AfterValidator(_tool_name)]


def _no_entries() -> list[Any]:
    """What `list` gives, as an array's default: pydantic reads a default factory's signature when it builds a
    validator, and a builtin's it parses from its text signature with the tokenizer (compiling the tokenizer's
    patterns first), about 3 ms of every start (bench/cli_startup.py); a function's it reads as it is."""
    return []


class _Table(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, strict=True)
