"""The action-required gate: does a channel message deserve a durable task? Pure and deterministic, no model.

Six ordered rules (the founding substrate document); the first that decides wins and the verdict names it:

1. `attachment`   a message with an attachment always creates a task;
2. `empty`        empty text never does (nothing but whitespace and punctuation);
3. `polite_only`  polite wrappers ("hi", "please", "could you", "thanks", "kind regards", ...) are stripped from
                  the start and end of every sentence; a message that was nothing but politeness creates no task;
4. `question`     an informational question never creates a task, even when it names a document: every sentence
                  left opens with an interrogative ("what", "is", "does", ...) or an informational opener
                  ("tell me", "explain", "let me know", ...), or ends with "?" without opening on a work verb;
5. `imperative`   a sentence that opens with a work verb and names a work artifact after it ("review the Q3
                  report", "send invoice_17.pdf") creates a task;
6. `conversation` everything else is conversation: no task. Ambiguity (a work verb with no artifact, a negated
                  verb, a statement about an artifact) lands here, so ambiguity never creates a task.

A polite request form ("could you", "can you", "would you") is a wrapper: "Could you send the invoice?" is the
imperative "send the invoice". A trailing "?" is no signal on a sentence that opens with a work verb (chat drops
the request form: "send the invoice?"), so adding or removing a wrapper never changes a verdict.

The word lists are a `GateVocabulary` (English defaults; config may replace any list).

The rules read the text as a person sees it, not its code points (`readable`), so that odd characters can neither
hide a request from the gate nor fake one past it: compatibility forms are folded (NFKC: full-width letters,
mathematical alphanumerics, circled letters, ligatures), characters that print as nothing are removed (every format
character, Unicode category Cf: zero-width space, joiners, word joiner, soft hyphen, byte order mark, bidi controls;
the Hangul fillers and the blank braille cell), combining marks are dropped (an underlined or accented `send` reads
`send`), case is folded (`str.casefold`), and confusables are mapped to the Latin letters they imitate
(`_CONFUSABLES`: Cyrillic e, Greek omicron, small capitals, ...) in a word written entirely in Latin letters and
such lookalikes (`send` with a Cyrillic e): a word that has another letter of its own script (Russian `privet` in
Cyrillic) is a word of that script and left alone. The vocabulary is read the same way, so a configured list in
another language matches as written. Not undone: the visual reordering that bidi overrides ask for (the controls
are removed, the letters read in stored order) and digits written for letters (`s3nd`): such a message reads as
conversation, and ambiguity never creates a task."""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DEFAULT_VOCABULARY",
    "GATE_RULES",
    "GateRule",
    "GateVerdict",
    "GateVocabulary",
    "decide",
]

GateRule = Literal["attachment", "empty", "polite_only", "question", "imperative", "conversation"]
GATE_RULES: tuple[GateRule, ...] = ("attachment", "empty", "polite_only", "question", "imperative", "conversation")

_WORK_VERBS = (
    "add", "analyse", "analyze", "approve", "archive", "audit", "book", "build", "calculate", "cancel", "check",
    "close", "compile", "complete", "convert", "correct", "create", "deploy", "draft", "edit", "email", "export",
    "file", "fill", "finalise", "finalize", "finish", "fix", "format", "forward", "generate", "import", "investigate",
    "issue", "merge", "migrate", "pay", "prepare", "print", "process", "proofread", "publish", "rebase", "reconcile",
    "record", "refactor", "refund", "release", "remove", "rename", "renew", "reply", "revise", "review", "rewrite",
    "run", "scan", "schedule", "send", "sign", "submit", "summarise", "summarize", "test", "translate", "triage",
    "update", "upload", "verify", "write",
)
_ARTIFACTS = (
    "agenda", "application", "article", "backlog", "bill", "branch", "brief", "budget", "bug", "build", "changelog",
    "chart", "code", "commit", "config", "contract", "database", "deck", "deployment", "diagram", "doc", "document",
    "draft", "email", "estimate", "expense", "feature", "file", "folder", "form", "forecast", "invoice", "issue",
    "ledger", "letter", "manuscript", "memo", "migration", "minutes", "newsletter", "notes", "order", "page",
    "patch", "payment", "payroll", "pdf", "plan", "po", "policy", "post", "pr", "presentation", "proposal", "query",
    "quote", "readme", "receipt", "reconciliation", "record", "release", "report", "request", "script",
    "slide", "slides", "spec", "specification", "spreadsheet", "statement", "summary", "table", "task", "test",
    "tests", "ticket", "timesheet", "transcript", "translation", "whitepaper", "wiki",
)
_POLITE_PREFIXES = (
    "hi", "hello", "hey", "hiya", "greetings", "good morning", "good afternoon", "good evening", "morning",
    "dear team", "dear all", "dear colleagues", "hi team", "hi all", "hi everyone", "hello team", "hello all",
    "hey team", "hey all", "hi there", "hello there", "hey there", "team", "folks", "all",
    "please", "pls", "plz", "kindly", "could you", "can you", "would you", "will you", "could you please",
    "can you please", "would you please", "will you please", "if you could", "if you can",
    "i'd appreciate it if you could",
    "i was wondering if you could", "just", "quick favour", "quick favor", "sorry to bother you", "sorry",
)
_POLITE_SUFFIXES = (
    "please", "pls", "plz", "thanks", "thank you", "thx", "ty", "thanks a lot", "thanks so much", "thank you so much",
    "many thanks", "thanks in advance", "thank you in advance", "much appreciated", "appreciated", "cheers",
    "regards", "kind regards", "best regards", "warm regards", "best", "best wishes", "all the best", "ta",
    "if you can", "if you could", "if possible", "when you get a chance", "when you have a moment",
    "when you have time", "if you don't mind", "if you do not mind", "no rush", "have a nice day",
    "have a good day", "have a great day", "sincerely", "yours sincerely", "yours truly", "thanks team",
    "thank you team", "ok", "okay",
)
_QUESTION_OPENERS = (
    "what", "what's", "whats", "when", "when's", "where", "where's", "who", "who's", "whom", "whose", "why",
    "how", "how's", "which", "is", "isn't", "are", "aren't", "was", "wasn't", "were", "weren't", "am", "do",
    "does", "doesn't", "did", "didn't", "has", "hasn't", "have", "haven't", "had", "can", "can't", "could",
    "couldn't", "would", "wouldn't", "should", "shouldn't", "will", "won't", "shall", "may", "might", "must",
    "any idea", "any update", "any news", "anyone know", "does anyone", "do you know", "do we know",
)
_INFORMATIONAL_OPENERS = (
    "tell me", "explain", "let me know", "remind me", "i wonder", "i was wondering", "i'm wondering",
    "wondering", "just wondering", "curious", "quick question", "question", "fyi", "for your information",
    "describe", "clarify", "help me understand",
)
_NEGATIONS = ("don't", "do not", "dont", "never", "no need to", "not", "stop", "no")
_FILLERS = ("also", "and", "then", "now", "so", "first", "next", "finally", "additionally", "asap")
_FILE_NAME = re.compile(r"^[\w-]+\.(?:pdf|docx?|xlsx?|csv|txt|md|pptx?|json|ya?ml|toml|py|odt|ods|rtf|eml|png|jpe?g)$")
_SENTENCE_END = re.compile(r"(?:[.!?;]+(?=[\s,)\]\"']|$)|\n+)")
_TOKEN = re.compile(r"[a-z0-9_'\-./]+")
_GLUED = re.compile(r"\S*[a-z][.!?]+[a-z]\S*")
"""A run of text with a sentence mark between two letters: maybe a glued sentence end, maybe a file name."""
_GLUED_AT = re.compile(r"(?<=[a-z])([.!?]+)(?=[a-z])")
_TRIM = ".,:;!?-\u2013\u2014()[]\"'/"
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Letters and symbols that print as nothing (not of category Cf): the Hangul fillers and the blank braille cell."""
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "\u00b4": "'"})
_CONFUSABLES = {
    # Cyrillic
    "\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
    "\u0455": "s", "\u0456": "i", "\u0458": "j", "\u0501": "d", "\u051b": "q", "\u051d": "w", "\u04bb": "h",
    "\u04cf": "l", "\u0475": "v", "\u0461": "w", "\u0491": "r",
    # Greek
    "\u03bf": "o", "\u03b1": "a", "\u03bd": "v", "\u03b9": "i", "\u03ba": "k", "\u03c1": "p", "\u03c5": "u",
    "\u03c7": "x", "\u03f2": "c", "\u03f3": "j", "\u03b5": "e", "\u03c4": "t",
    # Armenian
    "\u0585": "o", "\u057d": "u", "\u0570": "h", "\u0578": "n", "\u0575": "j", "\u0566": "q",
    # Latin letters that are not a, b, c, ...: dotless i, small capitals, script g, alpha, long s
    "\u0131": "i", "\u0261": "g", "\u0251": "a", "\u017f": "s", "\u026a": "i", "\u0299": "b", "\u1d04": "c",
    "\u1d05": "d", "\u1d07": "e", "\u0262": "g", "\u029c": "h", "\u1d0a": "j", "\u1d0b": "k", "\u029f": "l",
    "\u1d0d": "m", "\u0274": "n", "\u1d0f": "o", "\u1d18": "p", "\u0280": "r", "\ua731": "s", "\u1d1b": "t",
    "\u1d1c": "u", "\u1d20": "v", "\u1d21": "w", "\u028f": "y", "\u1d22": "z",
}
"""Letters that look like a lower-case Latin letter (after case folding), and the letter they imitate. Not Unicode's
whole confusables table: the lookalikes of Latin letters in the scripts most used to spoof them."""
_WORD = re.compile(r"[^\W\d_]+")


class GateVocabulary(BaseModel):
    """The gate's word lists; every entry is a lower-case word or a phrase of words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    work_verbs: tuple[str, ...] = _WORK_VERBS
    artifacts: tuple[str, ...] = _ARTIFACTS
    polite_prefixes: tuple[str, ...] = _POLITE_PREFIXES
    polite_suffixes: tuple[str, ...] = _POLITE_SUFFIXES
    question_openers: tuple[str, ...] = _QUESTION_OPENERS
    informational_openers: tuple[str, ...] = _INFORMATIONAL_OPENERS
    negations: tuple[str, ...] = _NEGATIONS


DEFAULT_VOCABULARY = GateVocabulary()


class GateVerdict(BaseModel):
    """Whether a message creates a task, the rule that decided, and the text the rules read (wrappers stripped)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: bool
    rule: GateRule
    core: str = ""


def decide(text: str, *, attachments: int = 0, vocabulary: GateVocabulary = DEFAULT_VOCABULARY) -> GateVerdict:
    """Apply the six rules in order to one message (its text and how many attachments it carries)."""
    if attachments > 0:
        return GateVerdict(task=True, rule="attachment", core=text.strip())
    split = _sentences(text)
    if not split:
        return GateVerdict(task=False, rule="empty")
    phrases = _phrases(vocabulary)
    sentences = [s for s in (phrases.strip_wrappers(t) for t in split) if s]
    if not sentences:
        return GateVerdict(task=False, rule="polite_only")
    core = ". ".join(" ".join(words) for words, _ in sentences)
    kinds = [phrases.classify(s) for s in sentences]
    if all(k == "question" for k in kinds):
        return GateVerdict(task=False, rule="question", core=core)
    if "imperative" in kinds:
        return GateVerdict(task=True, rule="imperative", core=core)
    return GateVerdict(task=False, rule="conversation", core=core)


_Kind = Literal["question", "imperative", "other"]


def _sentences(text: str) -> list[tuple[list[str], bool]]:
    """The text's sentences as lower-case word lists, each with whether it ended in a question mark."""
    normal = _GLUED.sub(_unglue, readable(text))
    out: list[tuple[list[str], bool]] = []
    start = 0
    for m in _SENTENCE_END.finditer(normal):
        out.append((_words(normal[start : m.start()]), "?" in m.group()))
        start = m.end()
    out.append((_words(normal[start:]), False))
    return [(w, q) for w, q in out if w]


def readable(text: str) -> str:
    """`text` as the rules read it (see the module's notes): compatibility forms folded, invisible characters and
    combining marks removed, case folded, and Latin lookalikes in Latin-looking words mapped to their letters."""
    if text.isascii():
        return text.lower()
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", text).casefold())
    kept = "".join(ch for ch in folded
                   if ch not in _INVISIBLE and unicodedata.category(ch) not in ("Cf", "Mn", "Me"))
    return _WORD.sub(_delatinise, unicodedata.normalize("NFC", kept).translate(_APOSTROPHES))


def _delatinise(m: re.Match[str]) -> str:
    """A word of Latin letters and lookalikes only, with the lookalikes mapped; any other word as it is."""
    word = m.group()
    if word.isascii() or not all(ch.isascii() or ch in _CONFUSABLES for ch in word):
        return word
    return "".join(_CONFUSABLES.get(ch, ch) for ch in word)


def _unglue(m: re.Match[str]) -> str:
    """A word glued to the next sentence by a period with no space ("invoice.thanks", as quick typists leave it)
    is split there, as a sentence end; a file name ("invoice_17.pdf") is one word and stays whole."""
    word = m.group()
    if _FILE_NAME.match(word.strip(_TRIM)):
        return word
    return _GLUED_AT.sub(r"\1 ", word)


def _words(chunk: str) -> list[str]:
    words = (t.strip(_TRIM) for t in _TOKEN.findall(chunk))
    return [w for w in words if w]


class _Phrases:
    def __init__(self, v: GateVocabulary) -> None:
        self.v = v
        self.prefixes = _split_sorted(v.polite_prefixes)
        self.suffixes = _split_sorted(v.polite_suffixes)
        self.questions = _split_sorted(v.question_openers)
        self.informational = _split_sorted(v.informational_openers)
        self.negations = _split_sorted(v.negations)
        self.fillers = _split_sorted(_FILLERS)
        self.verbs = frozenset(readable(w) for w in v.work_verbs)
        self.artifacts = frozenset(readable(w) for w in v.artifacts)

    def strip_wrappers(self, sentence: tuple[list[str], bool]) -> tuple[tuple[str, ...], bool] | None:
        words, asked = sentence
        rest = tuple(words)
        changed = True
        while rest and changed:
            changed = False
            for p in self.prefixes:
                if rest[: len(p)] == p:
                    rest, changed = rest[len(p) :], True
                    break
            for s in self.suffixes:
                if len(rest) >= len(s) and rest[len(rest) - len(s) :] == s:
                    rest, changed = rest[: len(rest) - len(s)], True
                    break
        return (rest, asked) if rest else None

    def classify(self, sentence: tuple[tuple[str, ...], bool]) -> _Kind:
        words, asked = sentence
        if _opens(words, self.negations):
            return "other"
        if _opens(words, self.questions) or _opens(words, self.informational):
            return "question"
        body = words
        while (n := _opens(body, self.fillers) or _opens(body, self.prefixes)) and len(body) > n:
            body = body[n:]
        if _opens(body, self.negations):
            return "other"
        if body[0] in self.verbs:
            return "imperative" if any(self._artifact(w) for w in body[1:]) else "other"
        return "question" if asked else "other"

    def _artifact(self, word: str) -> bool:
        if word in self.artifacts or _FILE_NAME.match(word):
            return True
        return any(word.endswith(end) and word[: -len(end)] in self.artifacts for end in ("s", "es", "'s"))


@functools.lru_cache(maxsize=8)
def _phrases(v: GateVocabulary) -> _Phrases:
    """The vocabulary's word tables, read as the rules read text, built once per vocabulary (it is frozen), not for
    every message."""
    return _Phrases(v)


def _split_sorted(phrases: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Phrases as word tuples, longest first, so "could you please" is stripped before "could you"."""
    return tuple(sorted({tuple(readable(p).split()) for p in phrases if p.split()}, key=lambda p: (-len(p), p)))


def _opens(words: tuple[str, ...], phrases: tuple[tuple[str, ...], ...]) -> int:
    for p in phrases:
        if words[: len(p)] == p:
            return len(p)
    return 0
