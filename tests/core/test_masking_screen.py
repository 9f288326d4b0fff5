"""The quick screen (`_triggers`) lets text through unmasked only when no detector could start from it. Its trigger
words are grouped by first letter for speed; grouped, the screen must say exactly what the plain list of words
says, for every text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from core.masking._detectors import _TRIGGER_WORDS

PLAIN = re.compile(
    r"sk-|gh[pousr]_|github_pat_|xox[abprs]-|a[ks]ia|eyj|-----begin|-----end|://|@|pass|secret|token|key|credential|auth"
    r"|bearer|curl|wget|mysql|mariadb|sshpass|redis-cli")
"""The trigger words as one plain alternation (the screen's earlier form)."""

WORDS = ["sk-", *(f"gh{c}_" for c in "pousr"), "github_pat_", *(f"xox{c}-" for c in "abprs"), "akia", "asia", "eyj",
         "-----begin", "-----end", "://", "@", "pass", "secret", "token", "key", "credential", "auth", "bearer", "curl",
         "wget", "mysql", "mariadb", "sshpass", "redis-cli"]
NEAR = ["sk", "gh_", "ghx_", "github_pa", "xox-", "xoxc-", "aki", "asja", "ey", "----begin", "-----beg", ":/", "pas",
        "secre", "toke", "ke", "credentia", "aut", "beare", "cur", "wge", "mysq", "mariad", "redis-cl"]


def test_every_trigger_word_is_found_alone_and_inside_text() -> None:
    for word in WORDS:
        for text in (word, f"receipt {word} done", f"x{word}", f"{word}y"):
            assert _TRIGGER_WORDS.search(text), text


def test_near_misses_are_not_triggers() -> None:
    for near in NEAR:
        assert not _TRIGGER_WORDS.search(f"receipt rcpt_0193ab {near} committed before dispatch"), near


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from([*WORDS, *NEAR, "a", "s", "k", "-", ":", "/", "e", " ", "0", "x", "_", "p", "t"]),
                max_size=12))
def test_the_grouped_screen_says_what_the_plain_words_say(parts: list[str]) -> None:
    text = "".join(parts)
    assert bool(_TRIGGER_WORDS.search(text)) == bool(PLAIN.search(text))


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="abcdeghijklmnoprstuwxyz-_:/@0123456789 ", max_size=40))
def test_the_grouped_screen_agrees_on_any_text(text: str) -> None:
    assert bool(_TRIGGER_WORDS.search(text)) == bool(PLAIN.search(text))
