"""JSON text of a value, as `json.JSONEncoder(...).encode` writes it, with the C encoder built once.

`JSONEncoder.encode` builds a new C encoder for every value (`c_make_encoder`, with a fresh dict that remembers the
containers being written, to refuse a value that contains itself): for the small values Strata encodes on every
call (a call's input for its hash, a timeline row's data, a call row's arguments) that set-up is most of the
cost. `encoder(...)` builds the C encoder once, without that dict, and writes the very same text (the same C code
writes it); a value that contains itself then recurses until Python's recursion limit, and on that RecursionError
the value is encoded again by `JSONEncoder.encode` itself, which raises exactly what it always raised (ValueError
"Circular reference detected", or RecursionError for a value nested too deep). Any other error (a value JSON has
no form for, NaN where it is refused) is the same C code's, so the same error. The C encoder keeps no state between
values, so one is shared by every thread. tests/core/test_json_text.py holds the two equal."""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder as _json_encoder
from typing import Any


def encoder(*, sort_keys: bool = False, separators: tuple[str, str] | None = None, ensure_ascii: bool = True,
            allow_nan: bool = True) -> Callable[[Any], str]:
    """`json.JSONEncoder(sort_keys=..., separators=..., ensure_ascii=..., allow_nan=...).encode`, the same text and
    the same errors, with its C encoder made once."""
    plain = json.JSONEncoder(sort_keys=sort_keys, separators=separators, ensure_ascii=ensure_ascii,
                             allow_nan=allow_nan)
    make: Any = getattr(_json_encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the pure-Python encoder, as json itself would use
        return plain.encode
    strings = _json_encoder.encode_basestring_ascii if ensure_ascii else _json_encoder.encode_basestring
    once = make(None, plain.default, strings, None, plain.key_separator, plain.item_separator, sort_keys, False,
                allow_nan)
    join = "".join
    slow = plain.encode

    def encode(value: Any) -> str:
        try:
            return join(once(value, 0))
        except RecursionError:  # a value that contains itself, or one nested too deep: said as json says it
            return slow(value)

    return encode
