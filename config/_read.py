"""Reading one config file, and turning any problem with it into one ConfigError line: the file, the key as a
dotted path (`policy.rules[2].action`, entries counted from 0) and the reason. TOML syntax errors name the line
and column instead of a key. Secret values are never echoed back."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tomllib
import types
import typing
from collections.abc import Sequence
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from config._regular_file import read_regular
from config.schema import ConfigFile, field_type
from core.errors import ConfigError
from core.record import record

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")



@record
class ConfigDoc:
    """A validated config file and the sha256 of exactly the bytes that were parsed."""

    path: Path
    source: str
    sha256: str
    data: ConfigFile


def read_config_file(path: Path, *, source: str | None = None) -> ConfigDoc:
    """Read and validate `path`. `source` is how errors and `sources` name it (default: the path)."""
    label = source or str(path)
    try:
        raw = read_regular(path)
    except FileNotFoundError as exc:
        reason = exc.strerror or str(exc)
        if os.path.islink(path):
            reason = f"it is a symlink to {os.readlink(path)}, which does not exist"
        raise ConfigError(f"cannot read the file: {reason}", file=label) from None
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", file=label) from None
    return parse_config(raw, path=path, source=label)


def parse_config(raw: bytes, *, path: Path, source: str) -> ConfigDoc:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=source) from None
    if text.startswith("\ufeff"):  # invisible in an editor; TOML's own error would point at line 1, column 1
        raise ConfigError("starts with a byte order mark (U+FEFF), which TOML does not allow: save it as UTF-8 "
                          "without one", file=source)
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", file=source) from None
    except ValueError:  # not a TOMLDecodeError: an integer longer than Python converts (its int/str digit limit)
        raise ConfigError(f"invalid TOML: a number of more than {sys.get_int_max_str_digits()} digits, which "
                          "cannot be read", file=source) from None
    except RecursionError:  # tomllib reads arrays and inline tables by recursion
        raise ConfigError("invalid TOML: arrays or inline tables nested too deeply to read", file=source) from None
    try:
        data = ConfigFile.model_validate(table)
    except ValidationError as exc:
        raise validation_error(exc, file=source, order=list(table)) from None
    return ConfigDoc(path=path, source=source, sha256=hashlib.sha256(raw).hexdigest(), data=data)


def validation_error(exc: ValidationError, *, file: str, order: Sequence[str] = ()) -> ConfigError:
    """The first problem in file order (`order`: the file's top-level keys as written), the others counted."""
    rank = {key: i for i, key in enumerate(order)}
    errors = sorted(exc.errors(), key=lambda e: rank.get(str(e["loc"][0]), len(rank)) if e["loc"] else len(rank))
    err = errors[0]
    loc = tuple(p for p in err["loc"] if p != "[key]")
    reason = describe(err, ConfigFile)
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''} in this file)"
    return ConfigError(reason, file=file, key=dotted(loc) or None)


def dotted(loc: tuple[int | str, ...]) -> str:
    """`("policy", "rules", 2, "action")` -> `policy.rules[2].action`; keys that are not bare words are quoted."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _BARE_KEY.match(part):
            out += f"[{json.dumps(part)}]"
        else:
            out += f".{part}" if out else part
    return out


_REASONS = {
    "missing": "missing required key",
    "model_type": "must be a table",
    "model_attributes_type": "must be a table",
    "dict_type": "must be a table",
    "list_type": "must be an array",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "int_parsing": "must be an integer",
    "int_parsing_size": f"must be an integer of at most {sys.get_int_max_str_digits()} digits",
    "float_parsing": "must be a number",
    "finite_number": "must be a finite number",
    "float_type": "must be a number",
    "string_too_short": "must not be empty",
}
_BOUNDS = {"greater_than": "must be greater than {gt}", "greater_than_equal": "must be at least {ge}",
           "less_than": "must be less than {lt}", "less_than_equal": "must be at most {le}"}


def describe(err: Any, root: type[BaseModel] | None = None, *, origin: str | None = None) -> str:
    """A pydantic error as a short reason, with the offending value (and where it came from) unless the value
    is a secret. `root`: the model validated, to list the keys allowed beside an unknown one."""
    kind = err["type"]
    loc = tuple(p for p in err["loc"] if p != "[key]")
    if kind == "extra_forbidden":
        return _unknown_key(str(loc[-1]), _allowed_keys(root, loc[:-1]) if root else [])
    if kind == "literal_error":
        reason = f"must be one of {err['ctx']['expected']}"
    elif kind == "string_too_short" and err.get("ctx", {}).get("min_length", 1) > 1:
        reason = f"must be at least {err['ctx']['min_length']} characters"
    elif kind == "string_pattern_mismatch" and loc[-1:] == ("db",):
        reason = ("must be a postgresql:// URL (the SQLite store is strata.db in the home: STRATA_HOME chooses "
                  "the home)")
    elif kind in _REASONS:
        reason = _REASONS[kind]
    elif kind in _BOUNDS:
        reason = _BOUNDS[kind].format(**{k: _shown(v) for k, v in err["ctx"].items()})
    else:
        msg = str(err["msg"]).removeprefix("Value error, ")
        reason = msg[:1].lower() + msg[1:]
    if kind == "missing" or loc[:2] == ("secrets", "values") or loc[-1:] in _UNSHOWN:
        return reason
    return f"{reason} (got {_shown(err['input'])}{f' from {origin}' if origin else ''})"


_NUMERIC = re.compile(r"[-+0-9._eE]+")
"""A value spelled as a number: only such a value is shown cut short (a cut secret would escape masking)."""

_UNSHOWN = {("callback_url",)}
"""Keys whose values an error never shows: a URL's query or user part may carry a token."""


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(int(value))  # `5.0` reads 5; `1e308` stays 1e+308, never its 309 digits
    if isinstance(value, str) and len(value) > 40 and _NUMERIC.fullmatch(value):
        return f"{value[:20]!r}... ({len(value)} characters)"  # never a 5,000-digit line
    if isinstance(value, str | int | float):
        return repr(value)
    if isinstance(value, datetime | date | time):
        return "a date/time"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _unknown_key(key: str, allowed: list[str]) -> str:
    import difflib  # only for an unknown key: kept off every command's start

    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    if allowed:
        return f"unknown key {key!r} (allowed here: {', '.join(allowed)})"
    return f"unknown key {key!r}"


def _allowed_keys(root: type[BaseModel], parent: tuple[int | str, ...]) -> list[str]:
    """The keys of the table at `parent` (walking the schema's annotations: models, lists, optionals)."""
    node: Any = root
    for part in parent:
        node = _unwrap(node)
        if isinstance(part, int):
            args = typing.get_args(node)
            node = args[0] if args else None
        elif isinstance(node, type) and issubclass(node, BaseModel) and part in node.model_fields:
            node = field_type(node.model_fields[part])
        else:
            return []
    node = _unwrap(node)
    if isinstance(node, type) and issubclass(node, BaseModel):
        return list(node.model_fields)
    return []


def _unwrap(node: Any) -> Any:
    """`X | None` -> X."""
    if isinstance(node, types.UnionType) or typing.get_origin(node) is typing.Union:
        rest = [a for a in typing.get_args(node) if a is not type(None)]
        return rest[0] if len(rest) == 1 else node
    return node
