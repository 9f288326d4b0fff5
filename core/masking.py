"""Masking: the one implementation that keeps secrets and PII out of the ledger, timeline summaries, logs and
exports. A masked value reads `[MASKED:kind:fingerprint]`; the fingerprint is a keyed hash of the raw value, so
equal secrets correlate across rows without being revealed, and a different key gives unrelated fingerprints.

Every detector finds its matches on the whole text first; overlapping spans are merged (the longest names the
kind) and only then replaced, so no secret is ever half masked. Text that is already masked stays as it is: a
`[MASKED:...]` token is never masked again, and a match whose key or value starts inside one is dropped (the
earlier masking already decided about it).

Detector lengths are bounded (about 4 KiB per value, 64 KiB per private key block), which is what lets
`StreamMasker` hold back only a bounded tail: a streamed secret split across chunks never escapes raw.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from core.hashing import canonical_json

MaskKind = Literal[
    "private_key", "anthropic_key", "openai_key", "github_token", "slack_token", "aws_access_key",
    "aws_secret_key", "jwt", "known_secret", "url_password", "authorization", "secret_field", "card", "email",
]
KINDS: tuple[MaskKind, ...] = (
    "private_key", "anthropic_key", "openai_key", "github_token", "slack_token", "aws_access_key",
    "aws_secret_key", "jwt", "known_secret", "url_password", "authorization", "secret_field", "card", "email",
)
"""Every kind, most specific first: when two detectors claim exactly the same span, the earlier kind names it."""

MASK_TOKEN = re.compile(r"\[MASKED:[a-z_]{1,32}:[0-9a-f]{12}\]")
MIN_ENV_SECRET = 8
"""Environment values shorter than this are not treated as secrets (masking `1` or `true` would ruin logs)."""
MIN_KNOWN_SECRET = 4

_PRIORITY = {kind: i for i, kind in enumerate(KINDS)}
_CACHE_TEXT = 512
_TRIGGER_WORDS = re.compile(
    r"sk-|gh[pousr]_|github_pat_|xox[abprs]-|a[ks]ia|eyj|-----begin|-----end|://|@|pass|secret|token|key|credential|auth"
    r"|bearer")
_TRIGGER_DIGITS = re.compile(r"(?:[0-9][ -]?){12}[0-9]")
_DIGIT_RUN = re.compile(r"[0-9][0-9 -]{12}")
"""Cheap to search (no nested repetition): every match of `_TRIGGER_DIGITS` contains one, so most text never
meets the slower pattern."""


def _triggers(low: str) -> bool:
    """A quick, conservative screen (over lowered text): every detector's match contains one of the trigger
    words or a run of 13 digits, so text without any goes back unchanged without running the detectors."""
    return bool(_TRIGGER_WORDS.search(low) or (_DIGIT_RUN.search(low) and _TRIGGER_DIGITS.search(low)))
_CACHE_ENTRIES = 4096
_FAR = 1 << 62

# -- patterns -------------------------------------------------------------------------------------------------

# A key name "looks secret" when it ends with one of these words: `DB_PASSWORD`, `clientSecret`, `x-api-key`,
# `access_token`; but not `max_tokens`, `token_count`, `sort_key` or `PWD`. Patterns over `low` (the text with
# ASCII letters lowered, same length) start with a literal word, which lets the regex engine skip ahead fast.
_WORDS = (r"(?:pass(?:w(?:or)?d|phrase|(?<![a-z]pass))|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key"
          r"|private[_-]?key|signing[_-]?key|encryption[_-]?key|credentials?|auth(?<![a-z]auth))")
_SEP = r"\\*[\"']?[ \t]{0,32}(?::=|=>|[:=])[ \t]{0,32}(?![0-9a-f]{12}\])"
_NOT_A_VALUE = r"(?!(?:null|none|true|false|str|bytes|int|undefined)(?:[\s\"'`&\\,;|)\]}]|\Z))"
_UNQUOTED = r"(?:[^\s\"'`&\\]|\\(?![nrt\"'\\]))"

_SCHEMES = r"(?:bearer|basic|token|digest|negotiate|ntlm|apikey|aws4-hmac-sha256)"
_MAX_VALUE = 4096
# A key (with its separator) is found by one regex and its value by another: the end of an unquoted value is a
# scan for the next terminator that every key inside the same run shares (see _RunEnds), so text such as
# `password=password=...` stays linear.
_FIELD_KEY = re.compile(rf"{_WORDS}{_SEP}")
_QUOTED_VALUE = re.compile(
    rf"\"(?:{_SCHEMES}[ \t]+)?(?P<v1>(?:[^\"\\\n]|\\.)+)\""
    rf"|'(?:{_SCHEMES}[ \t]+)?(?P<v2>[^'\n]+)'"
    r"|\\+\"(?P<v3>[^\"\n]+?)\\+\"")
_UNQUOTED_START = re.compile(rf"{_NOT_A_VALUE}(?![=<>{{\[]){_UNQUOTED}")
_UNQUOTED_END = re.compile(r"[\s\"'`&]|\\[nrt\"'\\]")
_AUTH_KEY = re.compile(
    rf"authorization(?<![a-z0-9_]authorization)\\*[\"']?[ \t]{{0,32}}[:=][ \t]{{0,32}}(?![0-9a-f]{{12}}\])"
    rf"\\*[\"']?(?:{_SCHEMES}[ \t]+)?(?!{_SCHEMES}\b)(?=[^\s\"'`\\])")
_AUTH_END = re.compile(r"[\s\"'`\\]")
_SECRET_FIELD_OPEN_QUOTE = re.compile(rf"{_WORDS}{_SEP}\\*(?:\"(?:[^\"\\\n]|\\.)*|'[^'\n]*)\\?\Z")
_SECRET_KEY_NAME = re.compile(rf"[a-z0-9_.-]{{0,64}}?{_WORDS}|(?:proxy-)?authorization")
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_KEY_PREFIX = 64

_AUTH_VALUE = re.compile(rf"({_SCHEMES}[ \t]+)?(.+)", re.IGNORECASE | re.DOTALL)

_PEM_MARK = r"[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_PEM_BODY = (r"(?:(?:\s|\\+[rnt])++|(?:Proc-Type|DEK-Info|Version|Comment|Hash):[^\r\n\\]*+|[A-Za-z0-9+/=]++)*+")
_PEM = re.compile(rf"-----BEGIN{_PEM_MARK}{_PEM_BODY}(?P<end>-----END{_PEM_MARK})?")
_PEM_CONTINUED = re.compile(rf"{_PEM_BODY}(?P<end>-----END{_PEM_MARK})?")
_PEM_END = re.compile(rf"-----END{_PEM_MARK}")
_PEM_TAIL_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\\ \t\r\n")
"""What the part of a key block before its END line is made of (base64 lines, their breaks, escaped breaks)."""

_SIMPLE: tuple[tuple[MaskKind, re.Pattern[str]], ...] = (
    ("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,4096}")),
    ("openai_key", re.compile(r"sk-(?<![A-Za-z0-9]sk-)(?!ant-)[A-Za-z0-9_-]{20,4096}")),
    ("github_token", re.compile(r"gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255}")),
    ("slack_token", re.compile(r"xox[abprs]-[A-Za-z0-9-]{10,4096}")),
    ("aws_access_key", re.compile(r"A[KS]IA(?<![A-Za-z0-9]A[KS]IA)[A-Z0-9]{16}")),
    ("jwt", re.compile(r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{2,4096}+\.[A-Za-z0-9_-]{2,4096}+"
                       r"\.[A-Za-z0-9_-]{0,4096}+")),
)
_LOWERED: tuple[tuple[MaskKind, re.Pattern[str]], ...] = (
    ("aws_secret_key", re.compile(
        rf"(?:aws_?secret_?(?:access_?)?key|secret_?access_?key){_SEP}"
        r"\\*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")),
    ("authorization", re.compile(r"bearer(?<![a-z0-9_]bearer)[ \t]+(?P<v>[a-z0-9._~+/-]{16,4096}=*)")),
)
_URL_USERINFO = re.compile(r"://[^\s:/?#@\"'<>\[\]]{0,256}:(?P<v>[^\s/?#\"'<>]{1,1024})@")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_EMAIL_DOMAIN = re.compile(r"@(?![0-9]+x\.)[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}")
_EMAIL_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_CARD_RUN = re.compile(r"[0-9](?<![\w.][0-9])(?:[0-9]{12,18}|[0-9]{2,5}(?:[ -][0-9]{3,6}){2,})(?!\w)")
_DIGITS = re.compile(r"[0-9]+")
_LUHN_DOUBLED = str.maketrans("0123456789", "0246813579")
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}

_ENV_WORDS = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|APIKEY|API_KEY|PRIVATE_KEY|ACCESS_KEY", re.I)
_ENV_PARTS = frozenset({"KEY", "AUTH", "PASS", "PAT", "PWD"})
_ENV_NOT_A_VALUE = frozenset({"SOCK", "SOCKET", "PATH", "FILE", "DIR"})


def is_secret_env_name(name: str) -> bool:
    """`MY_API_KEY`, `GITHUB_TOKEN`, `PGPASSWORD`, `DB_PASS` look secret; `PWD`, `SSH_AUTH_SOCK`,
    `GIT_AUTHOR_NAME` and `KEY_FILE` (a path, not a key) do not."""
    parts = [p for p in re.split(r"[_.-]+", name.upper()) if p]
    if name.upper() == "PWD" or not parts or parts[-1] in _ENV_NOT_A_VALUE:
        return False
    return bool(_ENV_WORDS.search(name)) or any(p in _ENV_PARTS for p in parts)


def is_secret_key_name(key: str) -> bool:
    """Whether a mapping key or field name says its value is a secret (`password`, `api_key`, `Authorization`)."""
    return bool(_SECRET_KEY_NAME.fullmatch(_lower(key.strip().replace(" ", "_"))))


def _lower(text: str) -> str:
    """ASCII letters lowered, every index kept (str.lower can change the length of non-ASCII text)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def _run_start(text: str, end: int, chars: frozenset[str], limit: int) -> int | None:
    """Start of the run of `chars` that ends at `end`, or None when it is longer than `limit`."""
    start = end
    while start > 0 and text[start - 1] in chars:
        start -= 1
        if end - start > limit:
            return None
    return start


def _luhn(digits: str) -> bool:
    reverse = digits[::-1]
    return (sum(map(int, reverse[0::2])) + sum(map(int, reverse[1::2].translate(_LUHN_DOUBLED)))) % 10 == 0


def _issuer_ok(digits: str) -> bool:
    """Issuer prefix and length of the common card schemes (Visa, Mastercard, Amex, Discover, JCB, Diners,
    UnionPay): with Luhn alone, one in ten long numbers (ids, timestamps) would read as a card."""
    n = len(digits)
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return n in (13, 16, 19)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if two in (62, 65) or four == 6011 or 644 <= int(digits[:3]) <= 649 or 3528 <= four <= 3589:
        return 16 <= n <= 19
    if two in (36, 38) or 300 <= int(digits[:3]) <= 305:
        return 14 <= n <= 16
    return False


def _is_card(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and _issuer_ok(digits) and _luhn(digits)


def _card_in_run(run: str) -> tuple[int, int] | None:
    """The longest card number in a run of digit groups: one plain 13-19 digit group, or consecutive groups of
    3-6 digits (4-4-4-4, 4-6-5, ...). Requiring group sizes keeps UUID-like and date-like runs out; a run of more
    than 8 groups is a table of numbers, not a written card number, and is left alone."""
    if run.isdigit():
        return (0, len(run)) if _is_card(run) else None
    groups = [(m.start(), m.end(), m.group()) for m in _DIGITS.finditer(run)]
    if len(groups) > 8:
        return None
    best: tuple[int, int, int] | None = None
    for i, (start, _, first) in enumerate(groups):
        if not 3 <= len(first) <= 6 or first[0] not in "23456":
            continue
        digits = ""
        for j in range(i, min(i + 7, len(groups))):  # 7 groups of 3 digits or more already exceed 19 digits
            _, end, group = groups[j]
            if not 3 <= len(group) <= 6 or len(digits) + len(group) > 19:
                break
            digits += group
            if len(digits) >= 13 and (best is None or len(digits) > best[2]) and _is_card(digits):
                best = (start, end, len(digits))
    return (best[0], best[1]) if best else None


@dataclass(frozen=True, slots=True)
class _Hit:
    ctx: int
    """Where the evidence for this match starts (the key of `key=value`, the scheme of a URL): a stream must not
    emit the context and hold back the value."""
    start: int
    end: int
    kind: MaskKind
    value: str | None = None
    """The raw secret to fingerprint when it differs from the span text (an escaped known secret)."""
    open_block: bool = False
    """A private key block without its END line yet (only meaningful to a stream)."""


def _known_variants(secret: str) -> set[str]:
    """A secret as it may appear in text: raw, JSON-escaped, URL-encoded."""
    return {secret, json.dumps(secret, ensure_ascii=False)[1:-1], quote(secret, safe="")}


EXCERPT_MASK_CHARS = 2048
"""Text longer than this is masked as a stream prefix of this many characters when only an excerpt is wanted."""


def _one_line(text: str, limit: int) -> str:
    line = " | ".join(p.strip() for p in text.strip().splitlines() if p.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


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
        self._known = sorted(variants.items(), key=lambda kv: -len(kv[0]))
        self._cache: dict[str, str] = {}

    @classmethod
    def from_env(cls, key: bytes, env: Mapping[str, str], extra_secrets: Iterable[str] = ()) -> Masker:
        """Known secrets are the values of environment variables whose names look secret, plus `extra_secrets`
        (configured literal values)."""
        from_env = [v for k, v in env.items() if is_secret_env_name(k) and len(v) >= MIN_ENV_SECRET]
        return cls(key, [*from_env, *extra_secrets])

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
        if not _triggers(text.lower()) and not any(v in text for v, _ in self._known):
            return text  # nothing any detector could start from: the common case for runtime summaries
        # Timeline rows repeat the same short texts (rule names, phase summaries): remember those.
        if len(text) <= _CACHE_TEXT:
            cached = self._cache.get(text)
            if cached is None:
                cached = self._render(text, self._spans(text, self._hits(text)))
                if len(self._cache) >= _CACHE_ENTRIES:
                    self._cache.clear()
                self._cache[text] = cached
            return cached
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
            if ctx is None:
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


class _RunEnds:
    """Where a value that starts at a position ends (the next terminator, at most _MAX_VALUE on). One scan serves
    every value that starts before the terminator it found."""

    def __init__(self, text: str, terminator: re.Pattern[str]) -> None:
        self._text, self._terminator = text, terminator
        self._from = self._to = -1

    def end(self, pos: int) -> int:
        if not self._from <= pos < self._to:
            m = self._terminator.search(self._text, pos)
            self._from, self._to = pos, m.start() if m else len(self._text)
        return min(self._to, pos + _MAX_VALUE)


def _overlapping(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Every match, also those starting inside an earlier one: a greedy value (`a)(Authorization: Basic b`) must
    not hide the next key's context."""
    m = pattern.search(text)
    while m:
        yield m
        m = pattern.search(text, m.start() + 1)


def _in_token(pos: int, tokens: list[tuple[int, int]]) -> bool:
    i = bisect.bisect_right(tokens, (pos, _FAR)) - 1
    return i >= 0 and tokens[i][0] <= pos < tokens[i][1]


def _outside(start: int, end: int, tokens: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """The parts of [start, end) that are not inside an existing mask token (tokens are sorted, disjoint)."""
    pos = start
    for s, e in tokens[max(0, bisect.bisect_right(tokens, (start, _FAR)) - 1):]:
        if s >= end:
            break
        if e <= pos:
            continue
        if s > pos:
            yield pos, s
        pos = max(pos, e)
    if pos < end:
        yield pos, end


class StreamMasker:
    """Masks text that arrives in chunks. `feed` returns what is safe to emit now and `flush` the rest; the
    concatenation equals masking the whole text at once (for secrets within the detectors' bounds).

    It holds back the tail that could still belong to an unfinished secret: the current line back to a bounded
    context before its last whitespace-free run, an open quoted value after a secret key, a prefix of a known
    secret, and an unterminated private key block (up to `block_limit`, after which the held block is masked
    as a whole and the rest of the block as it arrives)."""

    _CONTEXT = 256
    """Longest evidence before a value's run: `key` + separator, `Authorization: Bearer `, card groups."""

    def __init__(self, masker: Masker, *, hold_limit: int = 16384, block_limit: int = 65536) -> None:
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
        window = max(line_start, n - self._hold_limit)
        if "'" in text[window:] or '"' in text[window:]:
            low = _lower(text)
            m = _SECRET_FIELD_OPEN_QUOTE.search(low, window)
            if m:
                ctx = _run_start(low, m.start(), _KEY_CHARS, _KEY_PREFIX)
                hold = min(hold, m.start() if ctx is None else ctx)
        for variant, _ in self._masker._known:
            for k in range(min(len(variant) - 1, n), n - hold, -1):
                if text.endswith(variant[:k]):
                    hold = n - k
                    break
        return hold


def _tail_may_continue(text: str, end: int) -> bool:
    """After a private key body: end of text, or a short tail on the same line that may be its END line."""
    tail = text[end:]
    return len(tail) < 80 and "\n" not in tail



# -- cutting text that is masked later ------------------------------------------------------------------------

_PUNCTUATION_ONLY = re.compile(r"[^\w\s]+")


def cut_head(text: str, limit: int) -> str:
    """`text[:limit]` for text that is masked after it is cut (stored raw, masked when shown): a token split by
    the cut is dropped whole, because a secret's first half no longer looks like a secret (`ghp_` and 29
    characters is not a GitHub token to the detectors). A key block's beginning left without its end is still
    recognised, so nothing else is needed."""
    if len(text) <= limit:
        return text
    end = limit
    while end > 0 and not text[end].isspace() and not text[end - 1].isspace():
        end -= 1
    return text[:end]


def cut_tail(text: str, limit: int) -> str:
    """`text[-limit:]` for text masked after it is cut: the token split by the cut is dropped, and so is the next
    word, since its key may have been cut off (`pass|word = x`); and while a dropped word could be a key itself
    (punctuation, a trigger word, a trailing `:` or `=`: `Bearer x`, `Authorization: Bearer x`), the word after
    it goes too. A key block's body left without its BEGIN line is recognised by its END line."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    n = len(text)
    while start < n and not text[start].isspace() and not text[start - 1].isspace():
        start += 1  # the rest of a split token
    while True:
        while start < n and text[start].isspace():
            start += 1
        end = start
        while end < n and not text[end].isspace():
            end += 1
        word = text[start:end]
        start = end
        if not word or not (_PUNCTUATION_ONLY.fullmatch(word) or word.endswith((":", "=")) or _triggers(word.lower())):
            break
    return text[start:]
