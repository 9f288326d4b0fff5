"""The detectors: what a secret or PII looks like (the kinds, the patterns, the card and key-name rules), the quick
screen that lets most text through without running them, and the span helpers the masker and the stream masker
share. Every pattern is bounded (about 4 KiB per value, 64 KiB per private key block), which is what lets a stream
hold back only a bounded tail."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from typing import Literal
from urllib.parse import quote

from core.record import record

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

_TRIGGER_WORDS = re.compile(
    r"s(?:k-|ecret|shpass)|g(?:h[pousr]_|ithub_pat_)|xox[abprs]-|a(?:[ks]ia|uth)|eyj|-----(?:begin|end)|://|@|pass"
    r"|token|key|c(?:redential|url)|bearer|wget|m(?:ysql|ariadb)|redis-cli")
"""The trigger words (sk-, gh[pousr]_, github_pat_, xox[abprs]-, a[ks]ia, eyj, -----begin, -----end, ://, @, pass,
secret, token, key, credential, auth, bearer, curl, wget, mysql, mariadb, sshpass, redis-cli), grouped by their
first letter: the regex engine tries the alternatives one by one at every position whose letter starts one, so
fewer alternatives make the screen of text that is not a secret (nearly all of it) faster. Only whether it
matches is read."""
_TRIGGER_DIGITS = re.compile(r"(?:[0-9][ -]?){12}[0-9]")
_DIGIT_RUN = re.compile(r"[0-9][0-9 -]{12}")
"""Cheap to search (no nested repetition): every match of `_TRIGGER_DIGITS` contains one, so most text never
meets the slower pattern."""


def _triggers(low: str) -> bool:
    """A quick, conservative screen (over lowered text): every detector's match contains one of the trigger
    words or a run of 13 digits, so text without any goes back unchanged without running the detectors."""
    return bool(_TRIGGER_WORDS.search(low) or (_DIGIT_RUN.search(low) and _TRIGGER_DIGITS.search(low)))
_FAR = 1 << 62

# -- patterns -------------------------------------------------------------------------------------------------

# A key name "looks secret" when it ends with one of these words: `DB_PASSWORD`, `clientSecret`, `x-api-key`,
# `access_token`; but not `max_tokens`, `token_count`, `sort_key` or `PWD`. Patterns over `low` (the text with
# ASCII letters lowered, same length) start with a literal word, which lets the regex engine skip ahead fast.
_WORDS = (r"(?:pass(?:w(?:or)?d|phrase|(?<![a-z]pass))|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key"
          r"|private[_-]?key|signing[_-]?key|encryption[_-]?key|credentials?|auth(?<![a-z]auth)|mysql_pwd)")
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

# -- credentials in a command's arguments ---------------------------------------------------------------------
# `curl -u user:pw`, `wget --password pw`, `mysql -ppw`, `sshpass -p pw`, `redis-cli -a pw`: an option that only
# these commands give a password. It is looked for only in the rest of the command's line after the command's own
# name, so `sort -u`, `git push -u origin` or `cp -p` elsewhere stay readable; an option that prompts instead
# (`curl -u user`, `mysql -p`) has no value to mask.
_COMMAND_WORD = re.compile(
    r"(?<![^\s;|&(\"'`/])(?P<cmd>curl|wget|mysql(?:dump|admin|import|show|check)?|mariadb(?:-dump|-admin)?"
    r"|sshpass|redis-cli)(?=[\s\"'])")
_COMMAND_REACH = 4096
"""How far after a command's name its options are looked for (like every value, bounded: a stream holds the line
back from the name, see _stream.py)."""
_SEGMENT_MARK = re.compile(r"[\n\\'\";|&]")
_OPTION_VALUE = re.compile(
    r"\\*'(?P<q1>[^'\n\\]{1,4096})\\*'|\\*\"(?P<q2>[^\"\n\\]{1,4096})\\*\""
    r"|(?P<u>(?:[^\s\"'`\\;|&]|\\(?![nrt\"'\\])){1,4096})")
_SPACE = r"[ \t]+"
_SSHPASS_BEFORE_P = re.compile(r"(?:[ \t]+-[fdP][ \t]*[^\s]+|[ \t]+-[evhV])*[ \t]+")
"""What may stand between `sshpass` and its `-p`: its other options (`-f FILE`, `-d FD`, `-P PROMPT`, `-v`)."""
_COMMAND_OPTIONS: dict[str, re.Pattern[str]] = {
    # curl: -u/--user and -U/--proxy-user USER:PASSWORD (also ending a cluster of short flags, `-sSu`, or glued,
    # `-uUSER:PW`)
    "curl": re.compile(rf"-(?<=\s-)(?:-(?:proxy-)?user(?:=|{_SPACE})|[A-Za-z]{{0,8}}[uU]{_SPACE}|[uU](?=[^\s-]))"),
    "wget": re.compile(rf"-(?<=\s-)-(?:http-|ftp-|proxy-)?password{_SPACE}"),
    "mysql": re.compile(r"-(?<=\s-)p(?=[^\s])"),
    "sshpass": re.compile(rf"-(?<=\s-)p(?:{_SPACE})?"),
    "redis-cli": re.compile(rf"-(?<=\s-)(?:a|-pass){_SPACE}"),
}


def _command_family(cmd: str) -> str:
    return "mysql" if cmd.startswith(("mysql", "mariadb")) else cmd


class _Segment:
    """How far one command's line has been read for where the command ends: its line's end, or `;`, `|` or `&`
    outside quotes (`curl URL; sort -u a:b` leaves `sort` alone; `curl 'URL?a=1&b=2' -u U:P` keeps the URL's
    `&`). Read on as its options are met, so each part of a text is read once per command family."""

    __slots__ = ("closed", "pos", "quote", "used")

    def __init__(self, pos: int) -> None:
        self.pos, self.quote, self.closed, self.used = pos, "", False, False

    def open_at(self, text: str, pos: int) -> bool:
        """Whether the command still runs at `pos` (never before the last position asked)."""
        if not self.closed and pos > self.pos:
            for m in _SEGMENT_MARK.finditer(text, self.pos, pos):
                mark = m.group()
                if mark in ("'", '"'):
                    self.quote = "" if self.quote == mark else self.quote or mark
                elif mark == "\n" or (mark == "\\" and text.startswith("n", m.end())) or (
                        mark in ";|&" and not self.quote):
                    self.closed = True
                    break
            self.pos = pos
        return not self.closed


def _command_credentials(text: str) -> Iterator[tuple[int, int, int]]:
    """(where the command's name starts, value start, value end) of each password given as a command option to
    the nearest command of its family before it, on the same command line and at most _COMMAND_REACH on."""
    words: dict[str, list[tuple[int, int]]] = {}
    for m in _COMMAND_WORD.finditer(text):
        words.setdefault(_command_family(m.group("cmd")), []).append(m.span())
    for family, spans in words.items():
        starts = [start for start, _ in spans]
        segments: dict[int, _Segment] = {}
        for opt in _COMMAND_OPTIONS[family].finditer(text, spans[0][1]):
            i = bisect.bisect_right(starts, opt.start()) - 1
            start, end = spans[i]
            if opt.start() < end or opt.start() - end > _COMMAND_REACH:
                continue
            segment = segments.setdefault(i, _Segment(end))
            if not segment.open_at(text, opt.start()):
                continue
            if family == "sshpass":  # only sshpass's own -p: a later one is the command's (`ssh -p 2222`)
                if segment.used or not _SSHPASS_BEFORE_P.fullmatch(text, end, opt.start()):
                    segment.used = True
                    continue
                segment.used = True
            value = _OPTION_VALUE.match(text, opt.end())
            if value is None:
                continue
            v_start, v_end = value.span(value.lastgroup or "u")
            if family == "curl":  # USER:PASSWORD; without a colon curl asks for the password
                colon = text.find(":", v_start, v_end)
                if colon == -1:
                    continue
                v_start = colon + 1
            if v_start < v_end:
                yield start, v_start, v_end


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


@record(slots=True)
class _Hit:
    """One detector's match: where its evidence starts, the span it masks, and what kind of secret it is."""

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


def _tail_may_continue(text: str, end: int) -> bool:
    """After a private key body: end of text, or a short tail on the same line that may be its END line."""
    tail = text[end:]
    return len(tail) < 80 and "\n" not in tail
