"""The action-required gate: a table of phrasings with the verdict and deciding rule each must get, and the
property that adding or removing a polite wrapper never changes a verdict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.action_required import GATE_RULES, GateVocabulary, decide

T, N = True, False

# (text, attachments, task, rule)
TABLE: list[tuple[str, int, bool, str]] = [
    # rule 1: an attachment always creates a task, whatever the text
    ("", 1, T, "attachment"),
    ("   ", 1, T, "attachment"),
    ("\n\t", 2, T, "attachment"),
    ("thanks!", 1, T, "attachment"),
    ("What is this?", 1, T, "attachment"),
    ("fyi", 1, T, "attachment"),
    ("Hi team", 3, T, "attachment"),
    ("Don't send the invoice", 1, T, "attachment"),
    ("lol", 1, T, "attachment"),
    ("Is the contract attached?", 1, T, "attachment"),
    # rule 2: empty text never creates a task
    ("", 0, N, "empty"),
    (" ", 0, N, "empty"),
    ("\n", 0, N, "empty"),
    ("\t \n  ", 0, N, "empty"),
    ("\u00a0", 0, N, "empty"),
    ("\r\n\r\n", 0, N, "empty"),
    # rule 3: nothing but politeness
    ("thanks!", 0, N, "polite_only"),
    ("Thank you so much.", 0, N, "polite_only"),
    ("Hi team", 0, N, "polite_only"),
    ("hello there!", 0, N, "polite_only"),
    ("Kind regards", 0, N, "polite_only"),
    ("Good morning, thanks in advance. Cheers", 0, N, "polite_only"),
    ("PLEASE", 0, N, "polite_only"),
    ("Many thanks!!!", 0, N, "polite_only"),
    ("Hi. Thanks. Best regards.", 0, N, "polite_only"),
    ("Dear all,\n\nKind regards", 0, N, "polite_only"),
    ("hey", 0, N, "polite_only"),
    ("...thanks...", 0, N, "polite_only"),
    ("Thx", 0, N, "polite_only"),
    ("Much appreciated.", 0, N, "polite_only"),
    ("Sorry to bother you, thanks", 0, N, "polite_only"),
    ("Good afternoon all", 0, N, "polite_only"),
    # rule 4: informational questions, even naming documents
    ("What does the contract say about termination?", 0, N, "question"),
    ("Where is the Q3 report?", 0, N, "question"),
    ("Is the invoice paid?", 0, N, "question"),
    ("Has anyone reviewed the proposal?", 0, N, "question"),
    ("When is the budget due?", 0, N, "question"),
    ("Who owns the payroll spreadsheet?", 0, N, "question"),
    ("Why was the PR closed?", 0, N, "question"),
    ("How do I submit a timesheet?", 0, N, "question"),
    ("Which version of the spec is current?", 0, N, "question"),
    ("Did you send the invoice?", 0, N, "question"),
    ("Does the policy cover travel?", 0, N, "question"),
    ("Are the slides ready?", 0, N, "question"),
    ("Can you tell me where the contract is?", 0, N, "question"),
    ("Could you explain the budget?", 0, N, "question"),
    ("Hi, what's the status of the report? Thanks", 0, N, "question"),
    ("Please let me know when the invoice is paid.", 0, N, "question"),
    ("Tell me about the Q3 report", 0, N, "question"),
    ("Explain the changelog to me", 0, N, "question"),
    ("WHERE IS THE CONTRACT???", 0, N, "question"),
    ("whats the deadline for the report", 0, N, "question"),
    ("Any update on the invoice?", 0, N, "question"),
    ("Do you know who signed the contract?", 0, N, "question"),
    ("Quick question: is the ledger balanced?", 0, N, "question"),
    ("Was the migration run?", 0, N, "question"),
    ("Should we send the invoice today?", 0, N, "question"),
    ("Can we merge the branch?", 0, N, "question"),
    ("I was wondering what the contract says.", 0, N, "question"),
    ("Remind me what the budget was?", 0, N, "question"),
    ("Who wrote invoice_17.pdf?", 0, N, "question"),
    ("the report, where is it?", 0, N, "question"),
    ("the report, where is it?, please.", 0, N, "question"),
    ("Is report.pdf the final one? And where is the deck?", 0, N, "question"),
    ("Hey team! How's the proposal going?", 0, N, "question"),
    ("Fyi the report is out", 0, N, "question"),
    ("Would the contract allow that?", 0, N, "question"),
    ("How many invoices are open?", 0, N, "question"),
    ("Isn't the report due today?", 0, N, "question"),
    ("Kind regards. What is the PO number?", 0, N, "question"),
    ("Morning! Whose turn is it to write the minutes?", 0, N, "question"),
    ("what's in the readme?", 0, N, "question"),
    ("Clarify the policy on refunds", 0, N, "question"),
    ("any news on the contract", 0, N, "question"),
    ("How\u2019s the report coming along?", 0, N, "question"),
    ("Do we have the receipts?", 0, N, "question"),
    ("Where's budget.xlsx?", 0, N, "question"),
    ("Can I see the draft?", 0, N, "question"),
    ("What time is the meeting?", 0, N, "question"),
    # rule 5: an imperative work verb aimed at a work artifact
    ("Review the Q3 report", 0, T, "imperative"),
    ("Please review the Q3 report.", 0, T, "imperative"),
    ("Could you please review the Q3 report? Thanks!", 0, T, "imperative"),
    ("Hi team, can you send the invoice?", 0, T, "imperative"),
    ("send invoice_17.pdf to accounting", 0, T, "imperative"),
    ("SEND THE INVOICE NOW!!!", 0, T, "imperative"),
    ("Draft a reply email to the customer", 0, T, "imperative"),
    ("Summarise the meeting minutes", 0, T, "imperative"),
    ("Summarize the contract in three bullet points", 0, T, "imperative"),
    ("Fix the failing tests", 0, T, "imperative"),
    ("Update the changelog for the release", 0, T, "imperative"),
    ("Prepare the budget for next quarter, please", 0, T, "imperative"),
    ("Reconcile the ledger for March", 0, T, "imperative"),
    ("Translate the letter into French", 0, T, "imperative"),
    ("Kindly approve the purchase order", 0, T, "imperative"),
    ("Would you sign the contract today?", 0, T, "imperative"),
    ("Merge the PR when green", 0, T, "imperative"),
    ("Write a summary of the spec", 0, T, "imperative"),
    ("Proofread the newsletter", 0, T, "imperative"),
    ("Pay the outstanding invoices", 0, T, "imperative"),
    ("Submit the timesheet by Friday. Thanks!", 0, T, "imperative"),
    ("file the expense report", 0, T, "imperative"),
    ("Create a ticket for the login bug", 0, T, "imperative"),
    ("Triage the new issues", 0, T, "imperative"),
    ("Generate the payroll report", 0, T, "imperative"),
    ("Convert notes.md to a PDF", 0, T, "imperative"),
    ("Archive the old contracts", 0, T, "imperative"),
    ("Forward the receipt to finance", 0, T, "imperative"),
    ("Rename budget.xlsx to budget-2026.xlsx", 0, T, "imperative"),
    ("Edit the draft and tighten the intro", 0, T, "imperative"),
    ("Also, please check the spreadsheet.", 0, T, "imperative"),
    ("The meeting went well. Please send the minutes.", 0, T, "imperative"),
    ("What's the deadline? Please send the report.", 0, T, "imperative"),
    ("Good morning! Upload the slides to the wiki. Regards", 0, T, "imperative"),
    ("pls fix the bug in the parser code", 0, T, "imperative"),
    ("Can you please update the README? Cheers", 0, T, "imperative"),
    ("i was wondering if you could review the proposal", 0, T, "imperative"),
    ("Review the contract when you get a chance", 0, T, "imperative"),
    ("send the invoice?", 0, T, "imperative"),
    ("Dear team,\nPlease prepare the agenda for Monday.\nKind regards,", 0, T, "imperative"),
    ("Then verify the receipts", 0, T, "imperative"),
    ("Run the tests on the release branch", 0, T, "imperative"),
    ("Schedule the deployment for Sunday", 0, T, "imperative"),
    ("Compile the quarterly statements", 0, T, "imperative"),
    ("reVIEW tHe RePoRt", 0, T, "imperative"),
    ("Review — the report.", 0, T, "imperative"),
    ("Check report.pdf for typos", 0, T, "imperative"),
    ("Investigate the bug reported by Anna", 0, T, "imperative"),
    ("Refund the order from yesterday", 0, T, "imperative"),
    ("Process the invoices in the inbox folder", 0, T, "imperative"),
    ("Complete the form for the visa application", 0, T, "imperative"),
    ("Just send the quote", 0, T, "imperative"),
    ("Hello, would you please draft the memo? Thank you.", 0, T, "imperative"),
    ("Sorry, could you revise the estimate?", 0, T, "imperative"),
    ("Analyse the spreadsheet and tell me the totals", 0, T, "imperative"),
    ("Add a section to the document about risks", 0, T, "imperative"),
    ("Export the table as CSV", 0, T, "imperative"),
    # rule 6: everything else is conversation (ambiguity means no task)
    ("send it", 0, N, "conversation"),
    ("Please review", 0, N, "conversation"),
    ("Review this when you can", 0, N, "conversation"),
    ("The report is late.", 0, N, "conversation"),
    ("I sent the invoice yesterday.", 0, N, "conversation"),
    ("Don't send the invoice", 0, N, "conversation"),
    ("Do not merge the PR yet", 0, N, "conversation"),
    ("Never mind the report", 0, N, "conversation"),
    ("No need to review the contract", 0, N, "conversation"),
    ("lol", 0, N, "conversation"),
    ("ok cool", 0, N, "conversation"),
    ("Great job on the presentation!", 0, N, "conversation"),
    ("The contract looks fine to me", 0, N, "conversation"),
    ("I'll review the report tomorrow", 0, N, "conversation"),
    ("We should probably update the budget at some point", 0, N, "conversation"),
    ("Let's review the report later", 0, N, "conversation"),
    ("Invoice attached", 0, N, "conversation"),
    ("Happy Friday everyone", 0, N, "conversation"),
    ("See you at the meeting", 0, N, "conversation"),
    ("Thanks for the report, it was great", 0, N, "conversation"),
    ("Stop sending the reports", 0, N, "conversation"),
    ("Finish up when you can", 0, N, "conversation"),
    ("Fix it", 0, N, "conversation"),
    ("Send me a message later", 0, N, "conversation"),
    ("Coffee?", 0, N, "question"),
    ("👍", 0, N, "empty"),
    ("Anna is out today; the report can wait.", 0, N, "conversation"),
    ("report", 0, N, "conversation"),
    ("invoice_17.pdf", 0, N, "conversation"),
    ("Call me when you land", 0, N, "conversation"),
    ("Hi team, I'm on holiday next week. Regards", 0, N, "conversation"),
    ("The budget was approved. Congrats!", 0, N, "conversation"),
    ("not now", 0, N, "conversation"),
    ("?", 0, N, "empty"),
    ("!!!", 0, N, "empty"),
    ("Good news: the contract is signed", 0, N, "conversation"),
    ("Meeting moved to 3pm", 0, N, "conversation"),
    ("Sure, sounds good", 0, N, "conversation"),
    ("Please and thank you", 0, N, "conversation"),
]


def test_the_table_holds_at_least_150_distinct_phrasings_covering_every_rule() -> None:
    """The table is large enough and exercises each of the six rules."""
    assert len({(t, a) for t, a, _, _ in TABLE}) == len(TABLE) >= 150
    assert {rule for _, _, _, rule in TABLE} == set(GATE_RULES)


@pytest.mark.parametrize(("text", "attachments", "task", "rule"), TABLE)
def test_each_phrasing_gets_its_verdict_and_deciding_rule(text: str, attachments: int, task: bool, rule: str) -> None:
    """Every phrasing of the table gets the expected verdict, decided by the expected rule."""
    verdict = decide(text, attachments=attachments)
    assert (verdict.task, verdict.rule) == (task, rule), verdict


PREFIXES = ["Hi, ", "Hello team! ", "Please ", "please ", "Could you ", "could you please ", "Can you ", "Kindly ",
            "Hi team.\n", "Good morning, ", "Dear all,\n", "Hey! Please ", "Sorry to bother you, ", "Would you "]
SUFFIXES = [" please", ", please.", " Thanks!", "\n\nKind regards", " thanks in advance", ". Cheers",
            " when you get a chance", ", thank you.", " if possible", "\nBest regards,", " thx", ". Many thanks!"]


def _equivalent(a: tuple[bool, str], b: tuple[bool, str]) -> bool:
    """An empty message and one of nothing but politeness are the same verdict by two rules."""
    same_nothing = {a[1], b[1]} <= {"empty", "polite_only"}
    return a[0] == b[0] and (a[1] == b[1] or same_nothing)


@settings(max_examples=400, deadline=None)
@given(
    row=st.sampled_from([r for r in TABLE if r[1] == 0]),
    prefixes=st.lists(st.sampled_from(PREFIXES), max_size=2),
    suffixes=st.lists(st.sampled_from(SUFFIXES), max_size=2),
)
def test_adding_or_removing_a_polite_wrapper_never_changes_a_verdict(
    row: tuple[str, int, bool, str], prefixes: list[str], suffixes: list[str]
) -> None:
    """A phrasing with polite wrappers added gets the verdict of the bare phrasing, and the reverse."""
    text = row[0]
    wrapped = "".join(prefixes) + text + "".join(suffixes)
    bare, dressed = decide(text), decide(wrapped)
    assert _equivalent((bare.task, bare.rule), (dressed.task, dressed.rule)), (wrapped, bare, dressed)


def test_the_word_lists_are_configurable() -> None:
    """A vocabulary with a domain verb and artifact turns a conversation into a task, and the default does not."""
    text = "Book the shipment"
    custom = GateVocabulary(work_verbs=("book",), artifacts=("shipment",))
    assert decide(text).rule == "conversation"
    assert (decide(text, vocabulary=custom).task, decide(text, vocabulary=custom).rule) == (True, "imperative")


# Odd characters: a request hidden by invisible characters, compatibility forms or lookalike letters is still a task;
# a message that reads as no request is not made one by them.
HIDDEN_REQUESTS = [
    "Se\u200bnd the in\u200bvoice",  # zero-width spaces inside words
    "Re\u200dview the re\u200cport",  # zero-width joiner and non-joiner
    "Se\u00adnd the invoice",  # soft hyphen
    "\ufeffSend\u2060 the invoice\u2069",  # byte order mark, word joiner, a bidi control
    "Send\u3164 the invoice",  # a Hangul filler
    "\uff53\uff45\uff4e\uff44 \uff54\uff48\uff45 \uff49\uff4e\uff56\uff4f\uff49\uff43\uff45",  # full-width
    "\uff33\uff25\uff2e\uff24 THE INVOICE",
    "Review the \uff52\uff45\uff50\uff4f\uff52\uff54",
    # mathematical bold
    "\U0001d412\U0001d41e\U0001d427\U0001d41d the \U0001d422\U0001d427\U0001d42f\U0001d428\U0001d422\U0001d41c"
    "\U0001d41e",
    "\u24c8\u24d4\u24dd\u24d3 the invoice",  # circled letters
    "\ufb01le the report",  # a ligature
    "s\u0332e\u0332n\u0332d\u0332 the invoice",  # combining underline
    "S\u0435nd the invoic\u0435",  # Cyrillic e
    "\u0405end the invoice",  # Cyrillic dze
    "\u03a1\u0430\u0443 the invoice",  # Greek Rho, Cyrillic a and u
    "Send the \u026anvoice",  # a small capital
    # Cyrillic e throughout, the polite form still stripped
    "Could you pl\u0435ase r\u0435vi\u0435w th\u0435 r\u0435port?",
]
HARMLESS_ODD_TEXT = [
    # a full-width negation the gate used to drop, leaving "send the invoice"
    "\uff4e\uff45\uff56\uff45\uff52 send the invoice",
    "\U0001d403\U0001d428\U0001d427'\U0001d42d send the report",
    "\uff57\uff48\uff59 review the report?",  # a full-width question opener
    "N\u0435v\u0435r send the invoice",  # Cyrillic e in the negation
    "D\u043en't send the report",  # Cyrillic o
    "Do\u200bn't send the report",
    "No\u00a0need to send the report",
    "g\u200bood job on the re\u200bport",
    "Thanks \u200b\u200b\u200b",
    "\u200b\u200d\u2060",
    "Sent the invoice yesterday \U0001f389",
    # a Cyrillic word is a Cyrillic word, never mapped to Latin lookalikes
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u24e6\u24d7\u24d0\u24e3 about the report?",
    "\u202eecioval eht dnes",  # a bidi override: read in stored order, as conversation
]


@pytest.mark.parametrize("text", HIDDEN_REQUESTS)
def test_a_request_hidden_by_odd_characters_is_still_a_task(text: str) -> None:
    verdict = decide(text)
    assert (verdict.task, verdict.rule) == (True, "imperative"), verdict


@pytest.mark.parametrize("text", HARMLESS_ODD_TEXT)
def test_odd_characters_do_not_make_harmless_text_a_task(text: str) -> None:
    verdict = decide(text)
    assert not verdict.task, verdict


INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u2066", "\u2069", "\u180e"]
LOOKALIKES = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441",
                            "x": "\u0445", "s": "\u0455", "i": "\u0456"})


def _full_width(text: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)


@settings(max_examples=400, deadline=None)
@given(row=st.sampled_from([r for r in TABLE if r[1] == 0]),
       inserts=st.lists(st.tuples(st.integers(min_value=0), st.sampled_from(INVISIBLE)), max_size=6),
       disguise=st.sampled_from(["none", "full_width", "lookalikes", "upper"]))
def test_invisible_characters_and_disguised_letters_never_change_a_verdict(
    row: tuple[str, int, bool, str], inserts: list[tuple[int, str]], disguise: str
) -> None:
    """A phrasing of the table with format characters put anywhere in it, written full-width, with Cyrillic
    lookalikes for Latin letters, or upper case, gets the verdict of the phrasing as written."""
    text = row[0]
    odd = {"none": text, "full_width": _full_width(text), "lookalikes": text.translate(LOOKALIKES),
           "upper": text.upper()}[disguise]
    for at, ch in inserts:
        at %= len(odd) + 1
        odd = odd[:at] + ch + odd[at:]
    plain, disguised = decide(text), decide(odd)
    assert (plain.task, plain.rule) == (disguised.task, disguised.rule), (odd, plain, disguised)


def test_a_configured_vocabulary_is_read_as_the_text_is() -> None:
    """A vocabulary in another language with accents and capitals matches the message as a person writes it."""
    custom = GateVocabulary(work_verbs=("Pr\u00fcfe",), artifacts=("Bericht",))
    verdict = decide("pr\u00fcfe den \uff22\uff25\uff32\uff29\uff23\uff28\uff34", vocabulary=custom)
    assert (verdict.task, verdict.rule) == (True, "imperative"), verdict
