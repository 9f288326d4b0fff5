"""The masker remembers short texts it has masked (clean ones included), so a text a call repeats (a tool or rule
name, a phase summary) costs one look-up. The memo is the masker's own: a masker with other secrets (or another
key) never answers from it, a text is remembered as masked, never as it came in, and what a memo says is always
what masking the text afresh says."""

from __future__ import annotations

import random
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from core.masking import Masker

KEY = b"k" * 32
SECRET = "hunter2-correct-horse-battery"


def test_a_text_clean_for_one_masker_is_masked_by_one_that_knows_the_secret() -> None:
    text = f"deploy with {SECRET} now"
    before = Masker(KEY)
    assert before.mask(text) == text
    assert before.mask(text) == text  # answered from its memo
    after = Masker(KEY, [SECRET])  # the secret became known: a new masker, a new memo
    masked = after.mask(text)
    assert SECRET not in masked and "[MASKED:known_secret:" in masked
    assert before.mask(text) == text  # each masker keeps its own answer


def test_a_masked_text_is_remembered_masked_and_the_same_every_time() -> None:
    masker = Masker(KEY, [SECRET])
    text = f"token={SECRET}"
    first = masker.mask(text)
    assert SECRET not in first
    assert masker.mask(text) == first
    assert masker.mask(str(text)) == first  # an equal text, another object: the same answer


def test_a_key_change_gives_other_fingerprints_not_remembered_ones() -> None:
    text = f"password={SECRET}"
    assert Masker(b"a" * 32).mask(text) != Masker(b"b" * 32).mask(text)


def test_the_memo_is_bounded_and_keeps_answering_right_after_it_is_cleared() -> None:
    masker = Masker(KEY, [SECRET])
    rng = random.Random(7)
    texts = ["".join(rng.choices(string.ascii_lowercase + " ", k=20)) + str(i) for i in range(10_000)]
    for text in texts:
        masker.mask(text)
    assert len(masker._cache) <= 4096
    assert masker.mask(f"x {SECRET}") == Masker(KEY, [SECRET]).mask(f"x {SECRET}")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["ok", "noop_write", f"key={SECRET}", "sk-ant-api03-" + "a" * 40, "a@b.example",
                                 "4111 1111 1111 1111", "plain words", SECRET]), min_size=1, max_size=6))
def test_remembered_answers_are_what_masking_afresh_gives(parts: list[str]) -> None:
    remembered = Masker(KEY, [SECRET])
    for part in parts:  # fill the memo with the pieces first
        remembered.mask(part)
    for text in [*parts, " ".join(parts)]:
        assert remembered.mask(text) == Masker(KEY, [SECRET]).mask(text)
        assert remembered.mask(text) == remembered.mask(text)


def _one_line_by_splitting(text: str, limit: int) -> str:
    """The summaries' folding as it was written before the printable-text shortcut."""
    line = " | ".join(p.strip() for p in text.strip().splitlines() if p.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab  \t\n\r\x0b\x0c\x1c\x85\u2028\u3000z|")), max_size=40),
       st.integers(min_value=4, max_value=30))
def test_a_summary_folds_lines_as_splitting_every_line_does(text: str, limit: int) -> None:
    """Printable text (no line break of any kind) is folded without splitting: the same line as before."""
    assert Masker(KEY).summary(text, limit) == _one_line_by_splitting(text, limit)
