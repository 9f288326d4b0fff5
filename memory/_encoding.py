"""How the SQLite store packs a row's hashes and time (schema 8, memory/migrations.py), and reads them back.

Every API, export and verifier still sees the values of before: hashes as 64 lowercase hex characters, times as
the canonical ISO text (`2026-01-01T00:00:00.000000+00:00`). In the table they are smaller:

  - a hash is its 32 bytes (a BLOB), not 64 hex characters;
  - a time is the integer count of microseconds since 1970-01-01 UTC (8 bytes), not 32 characters;
  - an event's payload is stored without its leading `"kind":"<kind>",` (the `kind` column holds it);
  - in a call row's `data`, the detail of a decision step that allowed the call with the very text the row's
    `check` holds is stored as the number 0 (`["policy","allow",0]`): the detail is 50 characters or so, and no
    step has a number for a detail;
  - a timeline row's `prev_hash` is NULL when it is the hash of the row before it (row seq - 1; the genesis hash
    for row 1), which is what the store always writes: the reader puts it back;
  - a model attempt row's token usage as the list of its four counts (schema 9, `pack_data`; a usage given as a
    list that would read as packed is stored inside a list, and unwrapped on read);
  - a timeline row's `summary` that repeats other values of its row (schema 9) is a BLOB (`pack_summary`): its
    leading `<outcome>: ` (a phase row's `commit: ...`) or `<tool> ` (a call row's `noop_read {...} -> ok`) as one
    byte, and the batch id its `data` holds (`commit: batch <id> with 1 call(s)`) as one byte wherever it appears.

Only values that come back exactly are packed: a hash that is not 64 lowercase hex characters, or a time whose
text is not the canonical form of its instant (an older database's, or one edited behind the store's back), is
kept as the text it is (the columns have no type affinity, so SQLite stores each value as given). So the chains
hash the same text as before, and an edit to a packed value shows as a hash mismatch, as an edit to text did."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from core.clock import iso

GENESIS_HASH = "0" * 64
"""core/chain.py's, repeated here so the quick read of the command line (memory/quick_read.py, which imports the
migrations) stays free of pydantic; tests/memory/test_packed_rows_migration.py holds them equal."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HEX = frozenset("0123456789abcdef")
_ONE_US = timedelta(microseconds=1)


def pack_hash(digest: str) -> bytes | str:
    """The 32 bytes of a 64-hex-character hash; anything else as it is."""
    if type(digest) is str and len(digest) == 64 and _HEX.issuperset(digest):
        return bytes.fromhex(digest)
    return digest


def unpack_hash(value: object) -> str:
    """A stored hash as hex text (a value edited into something else: its text, so it matches no hash)."""
    if type(value) is bytes:
        return value.hex()
    return value if type(value) is str else "" if value is None else str(value)


def pack_time(at: str) -> int | str:
    """The microseconds since the epoch of a canonical UTC time text, when the text is exactly what
    `unpack_time` gives back for them; any other text as it is."""
    try:
        stamp = datetime.fromisoformat(at)
    except (TypeError, ValueError):
        return at
    if stamp.tzinfo is None:
        return at
    micros = (stamp - _EPOCH) // _ONE_US
    return micros if micros >= 0 and unpack_time(micros) == at else at


def packed_time(at: str, at_dt: datetime, stamp: str) -> int | str:
    """`pack_time(at)` for `at_dt` = `datetime.fromisoformat(at)` and `stamp` = `canonical_time(at_dt)`
    (core/timeline.py), which a commit has already, without parsing `at` and writing its instant out again:
    `unpack_time` of the instant's microseconds is the canonical text of that instant, `stamp`, so `at` comes back
    exactly when it is `stamp`. tests/memory/test_packed_time.py holds the two equal."""
    if at_dt.tzinfo is None:
        return at
    micros = (at_dt - _EPOCH) // _ONE_US
    return micros if micros >= 0 and stamp == at else at


def unpack_time(value: object) -> str:
    """A stored time as the canonical ISO text it stands for (text stays as it is)."""
    if type(value) is int:
        try:
            return iso(_EPOCH + timedelta(microseconds=value))
        except OverflowError:
            return str(value)
    return value if type(value) is str else str(value)


def pack_payload(kind: str, payload: str) -> str:
    """An event's JSON without the `"kind":"<kind>",` it begins with (`{"batch_id":...}` for
    `{"kind":"batch_completed","batch_id":...}`); any other text as it is."""
    prefix = f'{{"kind":"{kind}",'
    return "{" + payload[len(prefix):] if payload.startswith(prefix) else payload


def unpack_payload(kind: object, stored: object) -> str:
    """The event's JSON as it was given: the kind put back in front unless the text already begins with one (a
    payload kept whole: an older database's). Text that is no JSON object comes back as it is."""
    if type(stored) is not str:
        return stored if type(stored) is str else str(stored)
    if stored.startswith('{"kind":') or not stored.startswith("{"):
        return stored
    return f'{{"kind":"{kind}",{stored[1:]}'


_USAGE_KEYS = ("cache_read_tokens", "cache_write_tokens", "input_tokens", "output_tokens")
"""A model attempt's token usage (core/timeline_rows.py `Usage`), in the order canonical JSON writes them."""
_USAGE_KEY_SET = frozenset(_USAGE_KEYS)


def pack_data(kind: str, check: str | None, data: dict[str, Any]) -> dict[str, Any] | None:
    """A call row's `data` with the allowing steps' detail that repeats `check` replaced by 0; a model attempt's
    with its `usage` (the four token counts, integers) as the list of the counts in `_USAGE_KEYS` order (schema 9:
    `"usage":[0,0,1200,85]` for 83 characters of keys); None when there is nothing to pack (store `data` as it is).
    """
    if kind == "model_attempt":
        usage = data.get("usage")
        if type(usage) is dict and usage.keys() == _USAGE_KEY_SET and all(type(n) is int for n in usage.values()):
            return {**data, "usage": [usage[name] for name in _USAGE_KEYS]}
        if _packed_usage(usage) or _wrapped_usage(usage):  # a list given as it is that reading would take for
            return {**data, "usage": [usage]}              # a packed one: stored inside a list, unwrapped on read
        return None
    steps = data.get("steps") if kind == "call" and check else None
    if type(steps) is not list:
        return None
    packed = [[s[0], s[1], 0] if type(s) is list and len(s) == 3 and s[1] == "allow" and s[2] == check else s
              for s in steps]
    return {**data, "steps": packed} if packed != steps else None


def packed_data_json(kind: str, check: str | None, data: dict[str, Any], data_json: str,
                     encode: Callable[[Any], str]) -> str:
    """The `data` text the table keeps for a row whose `data` is `data_json` (its canonical JSON, as the hash
    covers it): `encode(pack_data(...))`, or `data_json` itself when there is nothing to pack. A call row's packed
    steps and a model attempt's packed usage are written as the same text with each packed value's own text
    replaced (canonical JSON is written value by value, so a value's text is the same wherever it stands), when
    that replaced text is found exactly where the packed values stand; anything else is encoded again from
    `pack_data`, as always. The text is the same either way (tests/memory/test_packed_data_json.py): the row's
    data is serialised once, not once for the hash and again for the table."""
    if kind == "model_attempt":
        usage = data.get("usage")
        if type(usage) is dict and usage.keys() == _USAGE_KEY_SET and all(type(n) is int for n in usage.values()):
            counts = [usage[name] for name in _USAGE_KEYS]
            whole = '"usage":{' + ",".join(f'"{name}":{int.__repr__(n)}' for name, n in zip(_USAGE_KEYS, counts,
                                                                                          strict=True)) + "}"
            if data_json.count(whole) == 1:
                return data_json.replace(whole, '"usage":[' + ",".join(int.__repr__(n) for n in counts) + "]")
    elif kind == "call" and check and type(check) is str and "]" not in check:
        steps = data.get("steps")
        if type(steps) is list:
            packed = sum(1 for s in steps if type(s) is list and len(s) == 3 and s[1] == "allow" and s[2] == check)
            if not packed:
                return data_json
            tail = f'"allow",{_json_text(check)}]'
            if data_json.count(tail) == packed:
                return data_json.replace(tail, _PACKED_STEP)
    packed_data = pack_data(kind, check, data)
    return data_json if packed_data is None else encode(packed_data)


def unpack_data(kind: object, check: object, text: str) -> str:
    """A call row's stored `data` text with each step detail stored as 0 written as the row's `check` again (one
    replace on the text, before it is parsed: the packed step is `..."allow",0]` exactly as `pack_data` wrote it
    in canonical JSON, and no step that was not packed has a number for its detail)."""
    if kind != "call" or type(check) is not str or type(text) is not str or _PACKED_STEP not in text:
        return text
    return text.replace(_PACKED_STEP, f'"allow",{_json_text(check)}]')


def stored_data(kind: object, check: object, text: str) -> Any:
    """A timeline row's stored `data` parsed, refused (ValueError) where no store wrote it: text that is not JSON,
    and also what Python's parser lets through but JSON has not (`NaN`, `Infinity`) or what no UTF-8 holds (a lone
    surrogate spelled `\\ud800`). core/timeline.py `seal` writes neither, so such a row was edited behind the
    store's back (or, for an infinity, stored by a Strata before that rule); read as it is, it would print as JSON
    no reader takes, or end the command mid-output."""
    text = unpack_data(kind, check, text)
    if type(text) is not str:  # a BLOB edited in: JSON only if its bytes are UTF-8 JSON
        return unpack_values(kind, json.loads(text, parse_constant=_refuse_constant))
    values = _decode(text)
    if "\\ud" in text or "\\uD" in text:  # only then may an escape spell a lone surrogate
        json.dumps(values, ensure_ascii=False).encode("utf-8")  # UnicodeEncodeError is a ValueError
    return unpack_values(kind, values)


def unpack_values(kind: object, values: Any) -> Any:
    """Parsed `data` with a model attempt's packed `usage` (a list of four integers, `pack_data`) written out as the
    counts by name again. No model attempt the loop writes has a list for its usage (core/timeline_rows.py
    `attempt_entry` takes `Usage.model_dump()`), so a list of four integers there is a packed one."""
    if kind != "model_attempt" or type(values) is not dict:
        return values
    usage: Any = values.get("usage")
    if _packed_usage(usage):
        return {**values, "usage": dict(zip(_USAGE_KEYS, usage, strict=True))}
    if _wrapped_usage(usage):
        return {**values, "usage": usage[0]}
    return values


def _packed_usage(usage: Any) -> bool:
    """A list of four integers: a packed usage (`pack_data`)."""
    return type(usage) is list and len(usage) == 4 and all(type(n) is int for n in usage)


def _wrapped_usage(usage: Any) -> bool:
    """A list holding one list: a usage given as a list that would read as packed (or as wrapped), stored inside
    a list so that it reads back as given (`pack_data`)."""
    return type(usage) is list and len(usage) == 1 and type(usage[0]) is list


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_decode = json.JSONDecoder(parse_constant=_refuse_constant).decode
"""Built once (json.loads with an argument builds a decoder per call)."""


_PACKED_STEP = '"allow",0]'
_json_text = json.encoder.encode_basestring  # a str as JSON text (any valid escaping will do: it is parsed next)


_OUTCOME, _TOOL, _BATCH = "\x01", "\x02", "\x03"
"""What a packed summary holds in place of `<outcome>: ` (first byte only), `<tool> ` (first byte only) and the batch
id of the row's `data` (anywhere). Control characters no summary the loop writes holds; a summary that holds one
is kept as text."""
_MARKS = frozenset(_OUTCOME + _TOOL + _BATCH)
_KEPT_AS_TEXT = _MARKS | {"\x00"}
"""A summary holding one of these is kept as text: a mark, or a NUL (a call's output may hold one), at which
SQLite's text functions stop, so the view (`summary_sql`) would cut a packed one there."""


def derived_summary(outcome: object, tool: object, data: object) -> str | None:
    """The summary the loop writes for a phase row of a batch (agent/loop.py), made from the row's other values:
    `commit: batch <id> with <n> call(s)` for a row whose data is exactly the batch id and its calls, `observe:
    batch <id> closed` for one whose data is exactly the batch id; None for any other row. A summary that is this
    text is stored as NULL (schema 10), and read back as it."""
    if tool is not None or type(data) is not dict or type(batch := data.get("batch_id")) is not str:
        return None
    if outcome == "commit" and len(data) == 2 and type(calls := data.get("calls")) is list:
        return f"commit: batch {batch} with {len(calls)} call(s)"
    if outcome == "observe" and len(data) == 1:
        return f"observe: batch {batch} closed"
    return None


def pack_summary(summary: str, outcome: str | None, tool: str | None,
                 data: dict[str, Any]) -> str | bytes | None:
    """A timeline row's summary as the table keeps it: NULL when it is the text `derived_summary` makes from the
    row's other values (schema 10); else a BLOB (UTF-8) with what the row's other columns repeat replaced by a mark
    (`_OUTCOME`, `_TOOL`, `_BATCH`), when that is shorter (`unpack_summary` gives the very text back); else the
    text as it is (a TEXT value, as every summary before schema 9)."""
    if summary == derived_summary(outcome, tool, data):
        return None
    head, rest = "", summary
    if outcome and summary.startswith(outcome + ": "):
        head, rest = _OUTCOME, summary[len(outcome) + 2:]
    elif tool and summary.startswith(tool + " "):
        head, rest = _TOOL, summary[len(tool) + 1:]
    batch = data.get("batch_id")
    if type(batch) is str and len(batch) > 1 and batch in rest:
        rest = rest.replace(batch, _BATCH)
    elif not head:
        return summary
    if not _KEPT_AS_TEXT.isdisjoint(summary):
        return summary
    try:
        blob = (head + rest).encode("utf-8")
    except UnicodeEncodeError:
        return summary
    if len(blob) >= len(summary.encode("utf-8")):
        return summary
    # `unpack_summary` gives `summary` back, so the blob is not decoded to check it: the summary holds no mark, so
    # neither does the outcome or tool it starts with, and replacing each batch id by the mark and the mark by the
    # batch id again gives the same text; what `unpack_summary` reads only from exact types is checked here
    # (tests/memory/test_packed_summaries.py holds this equal to decoding the blob, over generated rows).
    if (head == _OUTCOME and type(outcome) is not str) or (head == _TOOL and type(tool) is not str) \
            or (_BATCH in rest and type(data) is not dict):
        return summary
    return blob


def unpack_summary(stored: object, outcome: object, tool: object, data: object) -> Any:
    """A stored summary as the text it stands for: text as it is; NULL as `derived_summary` of the row (None when
    the row makes none: edited behind the store's back, it reads as damaged); a packed one (a BLOB) with its marks
    written out from the row's `outcome`, `tool` and `data` (parsed). A BLOB that is no packed summary (not UTF-8,
    or a mark the row has no value for) comes back as it is: it was edited behind the store's back, and the row
    reads as damaged, as a BLOB summary did before schema 9."""
    if stored is None:
        return derived_summary(outcome, tool, data)
    if type(stored) is not bytes:
        return stored
    try:
        text = stored.decode("utf-8")
    except UnicodeDecodeError:
        return stored
    if text[:1] == _OUTCOME:
        if type(outcome) is not str:
            return stored
        text = f"{outcome}: {text[1:]}"
    elif text[:1] == _TOOL:
        if type(tool) is not str:
            return stored
        text = f"{tool} {text[1:]}"
    if _BATCH in text:
        batch = data.get("batch_id") if type(data) is dict else None
        if type(batch) is not str:
            return stored
        text = text.replace(_BATCH, batch)
    return text


class Words:
    """A closed vocabulary a column's values mostly come from, stored as their numbers (schema 10): the number of
    a word is its index in `words`, so a word takes 0 or 1 byte in the record instead of its characters (numbers 0
    and 1 take none). A value that is no word of the list is stored as the text it is (the column has no type
    affinity, so SQLite keeps each value as given, and no writer stores a number there otherwise).

    The lists only ever grow at the end: a word's number is part of the stored data."""

    __slots__ = ("_numbers", "name", "word", "words")

    def __init__(self, name: str, *words: str) -> None:
        self.name = name
        """The list's name in the `words` table (migration 010), which the views read the words from."""
        self.words = words
        self._numbers = {word: number for number, word in enumerate(words)}
        self.word = dict(enumerate(words)).get
        """`word(value, value)`: the word a stored number stands for; anything else (text, None, a number that
        stands for no word, which no store wrote: the row then reads as damaged, and its hash does not match) as
        it is. A dict's own lookup, for the readers' loops."""

    def pack(self, value: Any) -> Any:
        """The number of a word of the list; anything else (another text, None) as it is."""
        return self._numbers.get(value, value) if type(value) is str else value

    def unpack(self, value: Any) -> Any:
        """A stored value as the word it stands for (`word`)."""
        return self.word(value, value)

    def matching(self, values: Iterable[str]) -> list[Any]:
        """What a stored value may be for any of `values`: each one's number (when it has one) and its text (a row
        an older database kept as text, or one edited behind the store's back)."""
        out: list[Any] = []
        for value in values:
            number = self._numbers.get(value)
            if number is not None:
                out.append(number)
            out.append(value)
        return out

    def sql(self, column: str) -> str:
        """`unpack` in SQL, for the views: the word looked up in the `words` table (a lookup rather than a CASE of
        every word, because SQLite parses every view of the schema whenever a connection first reads it)."""
        return (f"(CASE WHEN typeof({column}) = 'integer' THEN COALESCE((SELECT w.word FROM words w WHERE "
                f"w.list = '{self.name}' AND w.n = {column}), CAST({column} AS TEXT)) ELSE {column} END)")


EVENT_KINDS = Words("event_kind", "call_result", "batch_proposed", "batch_completed", "session_started",
                    "user_message", "assistant_message", "calls_parked", "approval_granted", "approval_rejected",
                    "grant_added", "rules_added", "session_resumed", "knowledge_changed", "tools_changed",
                    "repair_requested", "turn_verified", "compacted", "session_ended")
"""An event's kind (events.kind), commonest first."""
TIMELINE_KINDS = Words("timeline_kind", "phase", "call", "model_attempt", "receipt", "hook", "approval", "lifecycle",
                       "other")
"""A timeline row's kind (timeline.kind), commonest first."""
OUTCOMES = Words("outcome", "ok", "perceive", "commit", "act", "observe", "reflect", "plan", "error", "retry",
                 "denied", "done", "dispatched", "failed", "unknown", "reconciled", "recorded", "started", "resumed",
                 "forked", "ended", "interrupted", "parked", "compacted")
"""A timeline row's outcome (timeline.outcome): the phases' names, a call's or a model attempt's usual outcomes."""
CHECKS = Words("check", *(f"default: {safety} tools are allowed in {mode} mode"
                 for safety in ("read", "write", "execute", "network")
                 for mode in ("headless", "interactive", "ipc", "daemon", "mcp")))
"""A timeline row's check (timeline.check_name): what allowed a call when no rule did (tool_executor/checks/policy.py
`default: {safety} tools are allowed in {mode} mode`), in this order (safety, then mode)."""
WORD_LISTS = (EVENT_KINDS, TIMELINE_KINDS, OUTCOMES, CHECKS)
_kind, _check, _outcome = TIMELINE_KINDS.word, CHECKS.word, OUTCOMES.word


def timeline_words(kind: Any, check: Any, outcome: Any, data: Any) -> tuple[Any, Any, Any, Any]:
    """A timeline row's kind, check and outcome as the words they stand for, and its data as text (stored NULL:
    the empty object), as every reader of stored rows takes them."""
    return _kind(kind, kind), _check(check, check), _outcome(outcome, outcome), "{}" if data is None else data


def pack_empty(data: str) -> str | None:
    """A timeline row's `data` as the table keeps it (schema 10): NULL for the empty object `{}` (a phase row that
    names no batch), which the readers take as `{}`."""
    return None if data == "{}" else data


_SNAPSHOT_PREFIX = b"strata-zlib:"


def pack_snapshot(data: bytes) -> bytes:
    """A snapshot as the table keeps it: compressed (zlib, fast level), after a prefix that says so. A snapshot is
    JSON of the whole conversation, so it compresses about tenfold; level 1 costs ~5 ms per MB, once per
    `DEFAULT_SNAPSHOT_EVERY` events. Every snapshot written since schema 8 has the prefix, so one written
    before (never prefixed: JSON starts with `{`) is told apart whatever its bytes."""
    return _SNAPSHOT_PREFIX + zlib.compress(data, 1)


def unpack_snapshot(stored: bytes) -> bytes:
    """The snapshot's bytes as they were given (a corrupt compressed one: b"", which loads as no snapshot)."""
    if not stored.startswith(_SNAPSHOT_PREFIX):
        return stored
    try:
        return zlib.decompress(stored[len(_SNAPSHOT_PREFIX):])
    except zlib.error:
        return b""


def stored_datetime(value: object) -> datetime:
    """A stored time as a datetime: a packed one straight from its microseconds (the text `unpack_time` gives,
    parsed, is the same instant), text parsed as ISO (ValueError or TypeError when it is not)."""
    if type(value) is int:
        try:
            return _EPOCH + timedelta(microseconds=value)
        except OverflowError:
            raise ValueError(f"time out of range: {value}") from None
    return datetime.fromisoformat(value)  # type: ignore[arg-type]  # anything else: TypeError, as before


# The same in SQL, for the views and the queries that compare times (a packed time is shown as its text).
def time_sql(column: str) -> str:
    return (f"(CASE typeof({column}) WHEN 'integer' THEN strftime('%Y-%m-%dT%H:%M:%S', {column} / 1000000, "
            f"'unixepoch') || printf('.%06d+00:00', {column} % 1000000) ELSE {column} END)")


def payload_sql(kind: str, payload: str) -> str:
    return (f"(CASE WHEN substr({payload}, 1, 8) = '{{\"kind\":' OR substr({payload}, 1, 1) <> '{{' THEN {payload} "
            f"ELSE '{{\"kind\":\"' || {kind} || '\",' || substr({payload}, 2) END)")


def summary_sql(summary: str, outcome: str, tool: str, data: str) -> str:
    """`unpack_summary` in SQL (a packed summary written out; a BLOB that is none shown as it is)."""
    text = f"CAST({summary} AS TEXT)"
    head = (f"(CASE substr({text}, 1, 1) WHEN char(1) THEN {outcome} || ': ' || substr({text}, 2) "
            f"WHEN char(2) THEN {tool} || ' ' || substr({text}, 2) ELSE {text} END)")
    batch = f"(CASE WHEN json_valid({data}) THEN json_extract({data}, '$.batch_id') END)"
    return (f"(CASE WHEN typeof({summary}) <> 'blob' THEN {summary} "
            f"WHEN instr({text}, char(3)) = 0 THEN {head} ELSE replace({head}, char(3), {batch}) END)")


def summary_sql_10(summary: str, outcome: str, tool: str, data: str) -> str:
    """`unpack_summary` in SQL as of schema 10: a NULL summary written out as `derived_summary` makes it."""
    batch = f"json_extract({data}, '$.batch_id')"
    derived = (f"(CASE WHEN {tool} IS NULL AND json_valid({data}) AND json_type({data}, '$.batch_id') = 'text' THEN "
               f"(CASE WHEN {outcome} = 'commit' AND json_type({data}, '$.calls') = 'array' "
               f"AND json_remove({data}, '$.batch_id', '$.calls') = '{{}}' "
               f"THEN 'commit: batch ' || {batch} || ' with ' || json_array_length({data}, '$.calls') || ' call(s)' "
               f"WHEN {outcome} = 'observe' AND json_remove({data}, '$.batch_id') = '{{}}' "
               f"THEN 'observe: batch ' || {batch} || ' closed' END) END)")
    return f"(CASE WHEN {summary} IS NULL THEN {derived} ELSE {summary_sql(summary, outcome, tool, data)} END)"


def data_sql(kind: str, data: str) -> str:
    """`unpack_values` in SQL: a model attempt's packed usage written out (any other `data` shown as stored)."""
    usage = ", ".join(f"'{name}', json_extract({data}, '$.usage[{i}]')" for i, name in enumerate(_USAGE_KEYS))
    counts = " AND ".join(f"json_type({data}, '$.usage[{i}]') = 'integer'" for i in range(len(_USAGE_KEYS)))
    return (f"(CASE WHEN {kind} = 'model_attempt' AND typeof({data}) = 'text' AND json_valid({data}) "
            f"AND json_type({data}, '$.usage') = 'array' THEN (CASE "
            f"WHEN json_array_length({data}, '$.usage') = 4 AND {counts} "
            f"THEN json_set({data}, '$.usage', json_object({usage})) "
            f"WHEN json_array_length({data}, '$.usage') = 1 AND json_type({data}, '$.usage[0]') = 'array' "
            f"THEN json_set({data}, '$.usage', json(json_extract({data}, '$.usage[0]'))) "
            f"ELSE {data} END) ELSE {data} END)")


def hash_sql(column: str) -> str:
    return f"(CASE typeof({column}) WHEN 'blob' THEN lower(hex({column})) ELSE {column} END)"
