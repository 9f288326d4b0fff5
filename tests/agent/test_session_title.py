"""A session's title (what `strata sessions` and the exports call it): the first line of its first prompt, masked,
cut at a word boundary and ended with an ellipsis when it is longer than the listing's width."""

from __future__ import annotations

from agent.session import TITLE_CHARS, session_title
from core.masking import Masker


def test_a_short_prompt_is_its_own_title() -> None:
    assert session_title(Masker.throwaway(), "  tidy the changelog\nand more on the next line") == "tidy the changelog"


def test_a_long_prompt_is_cut_at_a_word_boundary_with_an_ellipsis() -> None:
    prompt = "rename every helper in the project so that the names say what the helpers do, then run the tests"
    title = session_title(Masker.throwaway(), prompt)
    assert title.endswith("…") and len(title) <= TITLE_CHARS
    assert prompt.startswith(title[:-1]) and prompt[len(title) - 1] == " "  # the cut falls between two words


def test_a_secret_in_the_prompt_is_masked_before_the_cut() -> None:
    title = session_title(Masker.throwaway(), "mail alice.smith@example.com about the release")
    assert "alice.smith@example.com" not in title and "[MASKED:" in title


def test_a_blank_prompt_has_no_title() -> None:
    assert session_title(Masker.throwaway(), "  \n ") == ""
