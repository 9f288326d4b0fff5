"""Text that is stored raw and masked when shown must be cut so that the masking still sees every secret: a token
split by a cut is dropped whole, a key's value loses its key with it, and a key block's body cut off from its
BEGIN line is still recognised by its END line."""

from __future__ import annotations

import random
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from core.masking import Masker, cut_head, cut_tail

M = Masker(bytes(range(32)))
ALNUM = string.ascii_letters + string.digits


def _token(rng: random.Random) -> tuple[str, str]:
    body = "".join(rng.choice(ALNUM) for _ in range(36))
    return rng.choice([("ghp_" + body, body), ("sk-ant-api03-" + body * 2, body), ("password = " + body, body),
                       ("Authorization: Bearer " + body, body), ("https://me:" + body + "@host", body)])


WORDS = st.lists(st.text(alphabet=string.ascii_lowercase + ".,:", min_size=1, max_size=8), max_size=30)


@settings(max_examples=300, deadline=None)
@given(WORDS, WORDS, st.integers(0, 2**32), st.integers(1, 200))
def test_no_cut_leaves_a_secret_the_masking_misses(before: list[str], after: list[str], seed: int,
                                                   limit: int) -> None:
    rng = random.Random(seed)
    secret, body = _token(rng)
    text = " ".join([*before, secret, *after])
    for kept in (cut_head(text, limit), cut_tail(text, limit)):
        masked = M.mask(kept)
        assert not any(body[i:i + 12] in masked for i in range(len(body) - 11)), (text, limit, kept, masked)


def test_cuts_keep_whole_words_and_short_text() -> None:
    assert cut_head("alpha beta", 20) == "alpha beta" == cut_tail("alpha beta", 20)
    assert cut_head("alpha beta gamma", 8) == "alpha "
    assert cut_head("alpha beta gamma", 6) == "alpha "
    assert cut_tail("alpha beta gamma delta epsilon", 15) == " epsilon"  # the cut "a", and "delta" after it
    assert cut_tail("key = value rest", 12) == " rest"  # the value whose key was cut off goes too


def test_a_key_block_cut_off_from_its_begin_line_is_still_masked() -> None:
    body = "\n".join("".join(random.Random(i).choice(ALNUM) for _ in range(64)) for i in range(6))
    block = f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"
    for tail in (block[40:], block[150:], "\\n".join(block[100:].splitlines())):  # escaped breaks too (JSON)
        masked = M.mask("output: " + tail + "\nfinished.")
        assert "[MASKED:private_key:" in masked and "finished." in masked
        assert not any(line[:12] in masked for line in body.splitlines())
