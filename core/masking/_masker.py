"""The masker: finds every detector's matches on the whole text, merges overlapping spans (the longest names the
kind) and only then replaces them with `[MASKED:kind:fingerprint]` tokens, so no secret is ever half masked; also
masks JSON-like values and makes masked one-line excerpts."""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from core.env_block import taken_secrets
from core.hashing import canonical_json
from core.masking._detectors import (
    _AUTH_END,
    _AUTH_KEY,
    _AUTH_VALUE,
    _CARD_RUN,
    _EMAIL_DOMAIN,
    _EMAIL_LOCAL_CHARS,
    _FIELD_KEY,
    _KEY_CHARS,
    _KEY_PREFIX,
    _LOWERED,
    _PEM,
    _PEM_END,
    _PEM_TAIL_CHARS,
    _QUOTED_VALUE,
    _SCHEME_CHARS,
    _SIMPLE,
    _UNQUOTED_END,
    _UNQUOTED_START,
    _URL_USERINFO,
    KINDS,
    MASK_TOKEN,
    MIN_ENV_SECRET,
    MIN_KNOWN_SECRET,
    MaskKind,
    _card_in_run,
    _command_credentials,
    _Hit,
    _in_token,
    _known_variants,
    _lower,
    _outside,
    _overlapping,
    _run_start,
    _RunEnds,
    _triggers,
    is_secret_env_name,
    is_secret_key_name,
)
from core.masking._stream import StreamMasker

EXCERPT_MASK_CHARS = 2048
"""Text longer than this is masked as a stream prefix of this many characters when only an excerpt is wanted."""

_PRIORITY = {kind: i for i, kind in enumerate(KINDS)}
_CACHE_TEXT = 512
_CACHE_ENTRIES = 4096


def _one_line(text: str, limit: int) -> str:
    if text.isprintable():  # no line break of any kind (each is unprintable): the line is the text, stripped
        line = text.strip()
    else:
        line = " | ".join(p.strip() for p in text.strip().splitlines() if p.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


_PATH_STARTS = ("/", "~/", "./", "../")
_PATH_LOOKBACK = 4096
_FILE_MESSAGES = ("no such file", "permission denied", "is a directory", "not a directory", "operation not permitted",
                  "file exists", "read-only file system", "too many levels of symbolic links", "directory not empty",
                  "input/output error", "file name too long", "no such device", "not valid json", "cannot open",
                  "does not exist", "not found", "empty file", "binary file matches")
"""What tools and errors write after `PATH:` (strerror's texts and the like): never a secret's value."""


def _names_a_file(low: str, ctx: int, key: str, after: int) -> bool:
    """Whether a secret word right after a `/` is the last part of a path followed by a colon and one of the
    messages tools and errors write about a file (`cat: /etc/passwd: No such file or directory`): a file's name and
    a message, not a field and its value. Anything else after it stays a value: `grep -r . /run/secrets` prints
    `/run/secrets/db_password:hunter2`, which is a secret. Only an absolute, home or relative path counts
    (`kubernetes.io/token: VALUE`, `db/password=VALUE` stay fields)."""
    if not key.rstrip().endswith(":") or not low.startswith(_FILE_MESSAGES, after):
        return False
    floor = max(0, ctx - _PATH_LOOKBACK)  # bounded: a long run of `/passwd:` without spaces stays linear
    start = max(low.rfind(" ", floor, ctx), low.rfind("\t", floor, ctx), low.rfind("\n", floor, ctx)) + 1
    if start == 0 and floor:  # the path's start is out of reach: kept a field
        return False
    return low[start:ctx].lstrip("'\"`([{<").startswith(_PATH_STARTS)


class Masker:
    """Masks secrets and PII in text and in JSON-like values. Pure and thread-safe once built (`on_known`, when
    set, must be thread-safe too)."""

    def __init__(self, key: bytes, known_secrets: Iterable[str] = ()) -> None:
        if not key:
            raise ValueError("a masking key must not be empty")
        self._key = bytes(key)
        self.on_known: Callable[[str], None] | None = None
        """Told each known secret (by value) found in masked text, so a home can remember the ones its sessions
        hold for processes that do not have them in their environment (config/seen_secrets.py)."""
        variants: dict[str, str] = {}
        for secret in known_secrets:
            if len(secret) >= MIN_KNOWN_SECRET:
                for variant in _known_variants(secret):
                    variants.setdefault(variant, secret)
        self._known = tuple(sorted(variants.items(), key=lambda kv: -len(kv[0])))
        """Fixed once built (the memo below relies on it)."""
        self._cache: dict[str, str] = {}
        """Short texts already masked, by text (`mask`), clean ones included."""

    @classmethod
    def from_env(cls, key: bytes, env: Mapping[str, str], extra_secrets: Iterable[str] = ()) -> Masker:
        """Known secrets are the values of environment variables whose names look secret, those this process took
        out of its environment (core/env_block.py: the model's API key), plus `extra_secrets` (configured literal
        values)."""
        from_env = [v for k, v in env.items() if is_secret_env_name(k) and len(v) >= MIN_ENV_SECRET]
        taken = [v for v in taken_secrets() if len(v) >= MIN_ENV_SECRET]
        return cls(key, [*from_env, *taken, *extra_secrets])

    @classmethod
    def throwaway(cls, env: Mapping[str, str] | None = None) -> Masker:
        """Patterns and the environment's secrets under a random key, for text no stored record will be matched
        with (error messages, doctor's report, embedded use without a home): its fingerprints correlate nothing."""
        return cls.from_env(os.urandom(32), os.environ if env is None else env)

    def fingerprint(self, value: str) -> str:
        raw = value.encode("utf-8", "surrogatepass")
        return hmac.new(self._key, raw, hashlib.sha256).hexdigest()[:12]

    def token(self, kind: MaskKind, value: str) -> str:
        return f"[MASKED:{kind}:{self.fingerprint(value)}]"

    def mask(self, text: str) -> str:
        # Timeline rows and checks repeat the same short texts (tool and rule names, phase summaries, steps):
        # remember those, clean or not, so a repeat costs one dict look-up instead of the screen's two regex
        # searches. The memo is this masker's own: its key and known secrets never change once it is built, so a
        # text's mask never changes either (a masker with other secrets is another masker, with its own memo).
        if len(text) <= _CACHE_TEXT:
            cached = self._cache.get(text)
            if cached is None:
                cached = self._mask(text)
                if len(self._cache) >= _CACHE_ENTRIES:
                    self._cache.clear()
                self._cache[text] = cached
            return cached
        return self._mask(text)

    def _mask(self, text: str) -> str:
        if not _triggers(text.lower()) and not any(v in text for v, _ in self._known):
            return text  # nothing any detector could start from: the common case for runtime summaries
        return self._render(text, self._spans(text, self._hits(text)))

    def contains_secret(self, text: str) -> bool:
        return bool(self._spans(text, self._hits(text)))

    def mask_value(self, value: Any) -> Any:
        """Masks every string inside dicts, lists, tuples and sets. The whole value of an entry whose key looks
        secret is masked, whatever it is (a number, a nested object); None and booleans say nothing and stay."""
        if isinstance(value, str):
            return self.mask(value)
        if type(value) is dict and self._plain(value):
            return value
        if isinstance(value, Mapping):
            return {self.mask(k) if isinstance(k, str) else k: self._mask_entry(k, v) for k, v in value.items()}
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*(self.mask_value(v) for v in value))
        if isinstance(value, list | tuple | set | frozenset):
            return type(value)(self.mask_value(v) for v in value)
        return value

    def stream(self, *, hold_limit: int = 16384, block_limit: int = 65536) -> StreamMasker:
        return StreamMasker(self, hold_limit=hold_limit, block_limit=block_limit)

    # -- excerpts: masked before they are cut (cut first, a secret across the cut would lose the part that makes
    # it recognisable). Longer text is masked as a stream prefix of EXCERPT_MASK_CHARS characters, which lets out
    # only what cannot be part of a secret, so an excerpt never costs a whole result. ------------------------------

    def _masked_prefix(self, text: str) -> tuple[str, bool]:
        """`text` masked, or a masked prefix of it (True) when it is long."""
        if len(text) <= EXCERPT_MASK_CHARS:
            return self.mask(text), False
        return self.stream().feed(text[:EXCERPT_MASK_CHARS]), True

    def excerpt(self, text: str, limit: int) -> str:
        """About the first `limit` characters of `text`, masked, never cutting a mask token in two, saying how
        long the whole was when it was cut (the evidence ledger's excerpts)."""
        masked, _ = self._masked_prefix(text)
        if len(text) <= EXCERPT_MASK_CHARS and len(masked) <= limit:
            return masked
        cut = min(limit, len(masked))
        start = masked.rfind("[MASKED:", max(0, limit - 48), limit)
        if start != -1:
            token = MASK_TOKEN.match(masked, start)
            if token is not None and token.end() > limit:
                cut = token.end()
        return f"{masked[:cut]}... [{len(text)} characters in all]"

    def summary(self, text: str, limit: int) -> str:
        """`text` masked and folded onto one line of at most `limit` characters (the timeline's summaries)."""
        masked, long = self._masked_prefix(text)
        if long:
            return _one_line(masked, limit - 3) + "..."
        return _one_line(masked, limit)

    # -- machinery ------------------------------------------------------------------------------------------

    def _plain(self, value: dict[Any, Any]) -> bool:
        """Whether a small JSON-like dict needs no masking at all: no text (keys included) any detector could
        start from, screened once over all of it (every secret-naming key holds one of the trigger words too).
        Anything unusual says no, and the value is masked entry by entry."""
        texts: list[str] = []
        stack: list[Any] = [value]
        while stack:
            item = stack.pop()
            kind = type(item)
            if kind is str:
                texts.append(item)
            elif kind is dict:
                for k, v in item.items():  # a key that names a secret holds a trigger word itself
                    if type(k) is not str:
                        return False
                    texts.append(k)
                    stack.append(v)
            elif kind is list or kind is tuple:
                if kind is tuple and hasattr(item, "_fields"):
                    return False
                stack.extend(item)
            elif item is not None and kind is not bool and kind is not int and kind is not float:
                return False
            if len(texts) > 64:
                return False
        joined = "\n".join(texts)
        return not _triggers(joined.lower()) and not any(v in joined for v, _ in self._known)

    def _mask_entry(self, key: Any, value: Any) -> Any:
        if not (isinstance(key, str) and is_secret_key_name(key)) or value is None or isinstance(value, bool):
            return self.mask_value(value)
        if not isinstance(value, str):
            return self.token("secret_field", canonical_json(value))
        if not value or MASK_TOKEN.fullmatch(value):
            return value
        kind: MaskKind = "authorization" if key.lower().endswith("authorization") else "secret_field"
        scheme, credentials = _AUTH_VALUE.fullmatch(value).groups("")  # type: ignore[union-attr]
        masked = self.mask(credentials)
        return scheme + (masked if MASK_TOKEN.fullmatch(masked) else self.token(kind, credentials))

    def _hits(self, text: str) -> list[_Hit]:
        hits: list[_Hit] = []
        for kind, pattern in _SIMPLE:
            for m in pattern.finditer(text):
                if kind == "openai_key" and not any(ch.isdigit() for ch in m.group()):
                    continue
                hits.append(_Hit(m.start(), m.start(), m.end(), kind))
        if "-----BEGIN" in text:
            for m in _PEM.finditer(text):
                hits.append(_Hit(m.start(), m.start(), m.end(), "private_key", open_block=m.group("end") is None))
        if "-----END" in text:  # the end of a key block whose beginning was cut off: its body up to the END line
            blocks = [(h.start, h.end) for h in hits if h.kind == "private_key"]
            for m in _PEM_END.finditer(text):
                if not any(s <= m.start() < e for s, e in blocks):
                    start = m.start()
                    while start > 0 and text[start - 1] in _PEM_TAIL_CHARS:
                        start -= 1
                    hits.append(_Hit(start, start, m.end(), "private_key"))
        low = _lower(text)
        for kind, pattern in _LOWERED:
            for m in _overlapping(pattern, low):
                ctx = _run_start(low, m.start(), _KEY_CHARS, _KEY_PREFIX)
                hits.append(_Hit(m.start() if ctx is None else ctx, *m.span("v"), kind))
        field_ends = _RunEnds(low, _UNQUOTED_END)
        for m in _FIELD_KEY.finditer(low):
            ctx = _run_start(low, m.start(), _KEY_CHARS, _KEY_PREFIX)
            if ctx is None or (low[ctx - 1:ctx] == "/" and _names_a_file(low, ctx, m.group(), m.end())):
                continue
            quoted = _QUOTED_VALUE.match(low, m.end())
            if quoted:
                hits.append(_Hit(ctx, *quoted.span(quoted.lastgroup or 0), "secret_field"))
            elif _UNQUOTED_START.match(low, m.end()):
                hits.append(_Hit(ctx, m.end(), field_ends.end(m.end()), "secret_field"))
        auth_ends = _RunEnds(low, _AUTH_END)
        for m in _AUTH_KEY.finditer(low):
            ctx = _run_start(low, m.start(), _KEY_CHARS, _KEY_PREFIX)
            hits.append(_Hit(m.start() if ctx is None else ctx, m.end(), auth_ends.end(m.end()), "authorization"))
        for ctx, start, end in _command_credentials(text):
            hits.append(_Hit(ctx, start, end, "secret_field"))
        if "://" in text:
            for m in _URL_USERINFO.finditer(text):
                ctx = _run_start(text, m.start(), _SCHEME_CHARS, 32)
                hits.append(_Hit(m.start() if ctx is None else ctx, *m.span("v"), "url_password"))
        if "@" in text:
            for m in _EMAIL_DOMAIN.finditer(text):
                local = _run_start(text, m.start(), _EMAIL_LOCAL_CHARS, 64)
                if local is None or local == m.start() or text[local:m.start()] == "git":
                    continue
                if text[max(0, local - 2):local] != "//":  # `https://user@host` names a user, not a mailbox
                    hits.append(_Hit(local, local, m.end(), "email"))
        for m in _CARD_RUN.finditer(text):
            card = _card_in_run(m.group())
            if card:
                hits.append(_Hit(m.start(), m.start() + card[0], m.start() + card[1], "card"))
        for variant, secret in self._known:
            i = text.find(variant)
            if i != -1 and self.on_known is not None:
                self.on_known(secret)
            while i != -1:
                hits.append(_Hit(i, i, i + len(variant), "known_secret", secret))
                i = text.find(variant, i + len(variant))
        return hits

    def _spans(self, text: str, hits: list[_Hit]) -> list[tuple[int, int, MaskKind, str]]:
        """Merged, non-overlapping (start, end, kind, fingerprinted value), outside any existing mask token."""
        if not hits:
            return []
        tokens = [m.span() for m in MASK_TOKEN.finditer(text)] if "[MASKED:" in text else []
        if tokens:
            hits = [h for h in hits if not (_in_token(h.ctx, tokens) or _in_token(h.start, tokens))]
        passwords = [(h.start, h.end) for h in hits if h.kind == "url_password"]
        if passwords:  # `scheme://user:pw@host` is one password, not also an email `pw@host`
            hits = [h for h in hits if h.kind != "email" or not any(h.start < e and s < h.end for s, e in passwords)]
        hits.sort(key=lambda h: (h.start, -h.end, _PRIORITY[h.kind]))
        clusters: list[tuple[int, int, _Hit]] = []
        for hit in hits:
            if clusters and hit.start < clusters[-1][1]:
                start, end, best = clusters[-1]
                if hit.end - hit.start > best.end - best.start:
                    best = hit
                clusters[-1] = (start, max(end, hit.end), best)
            else:
                clusters.append((hit.start, hit.end, hit))
        spans: list[tuple[int, int, MaskKind, str]] = []
        for start, end, best in clusters:
            whole = best.start == start and best.end == end
            for s, e in _outside(start, end, tokens):
                exact = whole and s == start and e == end and best.value is not None
                spans.append((s, e, best.kind, best.value if exact else text[s:e]))  # type: ignore[arg-type]
        return spans

    def _render(self, text: str, spans: list[tuple[int, int, MaskKind, str]]) -> str:
        if not spans:
            return text
        out: list[str] = []
        pos = 0
        for start, end, kind, value in spans:
            out.append(text[pos:start])
            out.append(self.token(kind, value))
            pos = end
        out.append(text[pos:])
        return "".join(out)
