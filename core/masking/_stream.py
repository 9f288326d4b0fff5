"""The stream masker: masks text that arrives in chunks, holding back only the bounded tail that could still belong
to an unfinished secret."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.masking._detectors import (
    _COMMAND_REACH,
    _COMMAND_WORD,
    _KEY_CHARS,
    _KEY_PREFIX,
    _PEM_CONTINUED,
    _SECRET_FIELD_OPEN_QUOTE,
    MaskKind,
    _Hit,
    _lower,
    _run_start,
    _tail_may_continue,
)


class _Masking(Protocol):
    """What the stream uses of its masker (`Masker`, core/masking/_masker.py, which builds streams over itself):
    named here so that the two modules do not import each other."""

    @property
    def _known(self) -> Sequence[tuple[str, str]]: ...

    def mask(self, text: str) -> str: ...

    def token(self, kind: MaskKind, value: str) -> str: ...

    def _hits(self, text: str) -> list[_Hit]: ...

    def _spans(self, text: str, hits: list[_Hit]) -> list[tuple[int, int, MaskKind, str]]: ...

    def _render(self, text: str, spans: list[tuple[int, int, MaskKind, str]]) -> str: ...


class StreamMasker:
    """Masks text that arrives in chunks. `feed` returns what is safe to emit now and `flush` the rest; the
    concatenation equals masking the whole text at once (for secrets within the detectors' bounds).

    It holds back the tail that could still belong to an unfinished secret: the current line back to a bounded
    context before its last whitespace-free run, an open quoted value after a secret key, a prefix of a known
    secret, and an unterminated private key block (up to `block_limit`, after which the held block is masked
    as a whole and the rest of the block as it arrives)."""

    _CONTEXT = 256
    """Longest evidence before a value's run: `key` + separator, `Authorization: Bearer `, card groups."""

    def __init__(self, masker: _Masking, *, hold_limit: int = 16384, block_limit: int = 65536) -> None:
        self._masker = masker
        self._hold_limit = hold_limit
        self._block_limit = block_limit
        self._parts: list[str] = []
        self._size = 0
        self._next_check = 0
        self._in_block = False

    def feed(self, chunk: str) -> str:
        if not chunk:
            return ""
        self._parts.append(chunk)
        self._size += len(chunk)
        if self._size < self._next_check:
            return ""
        text = "".join(self._parts)
        out, rest = self._drain(text)
        self._parts = [rest] if rest else []
        self._size = len(rest)
        self._next_check = len(rest) + max(64, len(rest) // 2)
        return out

    def flush(self) -> str:
        text = "".join(self._parts)
        self._parts, self._size, self._next_check = [], 0, 0
        head = ""
        if self._in_block:
            head, rest = self._block_continuation(text, final=True)
            assert rest is not None  # final: the block ends here
            text = rest
        return head + self._masker.mask(text)

    def _block_continuation(self, text: str, *, final: bool) -> tuple[str, str | None]:
        """Inside a private key block that was too long to hold: mask its rest as it arrives. Returns the
        masked text and what remains after the block, or None while the block may still continue."""
        m = _PEM_CONTINUED.match(text)
        end = m.end() if m else 0
        still_open = m is not None and m.group("end") is None and _tail_may_continue(text, end)
        if still_open and not final:
            if len(text) <= self._block_limit:
                return "", None
            return self._masker.token("private_key", text), ""
        self._in_block = False
        return (self._masker.token("private_key", text[:end]) if end else ""), text[end:]

    def _drain(self, text: str) -> tuple[str, str]:
        head = ""
        if self._in_block:
            head, after = self._block_continuation(text, final=False)
            if after is None:
                return "", text
            if self._in_block:
                return head, after
            text = after
        masker = self._masker
        hits = masker._hits(text)
        n = len(text)
        hold = self._hold_start(text)
        for hit in hits:
            if hit.kind == "private_key" and hit.open_block and _tail_may_continue(text, hit.end):
                if n - hit.ctx > self._block_limit:
                    self._in_block = True
                    prefix = masker.mask(text[:hit.ctx])
                    return head + prefix + masker.token("private_key", text[hit.ctx:]), ""
                hold = min(hold, hit.ctx)
        moved = True
        while moved:
            moved = False
            for hit in hits:
                if hit.ctx < hold < hit.end:
                    hold, moved = hit.ctx, True
        if hold <= 0:
            return head, text
        spans = [s for s in masker._spans(text, hits) if s[1] <= hold]
        return head + masker._render(text[:hold], spans), text[hold:]

    def _hold_start(self, text: str) -> int:
        n = len(text)
        if not n:
            return 0
        line_start = text.rfind("\n") + 1
        run_start = n if text[-1].isspace() else n - len(text.rsplit(None, 1)[-1])
        hold = max(line_start, run_start - self._CONTEXT, n - self._hold_limit)
        if hold > line_start and text[hold - 1] not in " \t\n":
            # Never from inside a run: whether `PATH/token: message` names a file depends on how that run starts
            # (_masker._names_a_file), and the held tail masked alone must decide as the whole text does.
            floor = max(line_start, n - self._hold_limit)
            hold = max(text.rfind(" ", floor, hold), text.rfind("\t", floor, hold), floor - 1) + 1
        window = max(line_start, n - self._hold_limit)
        if "'" in text[window:] or '"' in text[window:]:
            low = _lower(text)
            m = _SECRET_FIELD_OPEN_QUOTE.search(low, window)
            if m:
                ctx = _run_start(low, m.start(), _KEY_CHARS, _KEY_PREFIX)
                hold = min(hold, m.start() if ctx is None else ctx)
        # A command whose password option may still come (`curl ... -u` before its `USER:PASSWORD`): held from its
        # name, which the value's detection needs to see (for as far as its options are looked for).
        m = _COMMAND_WORD.search(text, max(window, n - _COMMAND_REACH - 16))
        if m is not None:
            hold = min(hold, m.start())
        for variant, _ in self._masker._known:
            for k in range(min(len(variant) - 1, n), n - hold, -1):
                if text.endswith(variant[:k]):
                    hold = n - k
                    break
        return hold
