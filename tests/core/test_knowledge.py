"""The pure parts of the knowledge index: strict front-matter, documents bound to their bytes, the manifest digest,
query terms and the discriminating rule, sections, and the grant check."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.knowledge import (
    ANSWER_ADAPTER,
    SECTION_MAX_BYTES,
    CorpusProblem,
    DatasetGrant,
    FrontMatterError,
    Hits,
    LoadedDocument,
    Miss,
    best_section,
    build_corpus,
    change_notice,
    check_scope,
    corpus_changes,
    is_discriminating,
    parse_front_matter,
    pii_of,
    query_terms,
    read_document,
    sections,
)

IDS = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_./-]{0,40}\Z")
TAGS = st.lists(st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,10}\Z"), unique=True, max_size=5)
BODY = st.text(max_size=200)


@given(doc_id=IDS, tags=TAGS, body=BODY, crlf=st.booleans(), quote=st.sampled_from(["", "'", '"']))
def test_front_matter_round_trips_id_tags_and_the_exact_body(doc_id: str, tags: list[str], body: str, crlf: bool,
                                                             quote: str) -> None:
    """Any accepted block gives back its id and tags, and the content is exactly the bytes after the block."""
    nl = "\r\n" if crlf else "\n"
    head = f"---{nl}id: {quote}{doc_id}{quote}{nl}# a comment{nl}{nl}tags: [{', '.join(tags)}]{nl}---{nl}"
    raw = (head + body).encode("utf-8")
    front = parse_front_matter(head + body)
    assert (front.id, front.tags) == (doc_id, tuple(tags))
    assert raw[front.content_offset:] == body.encode("utf-8")
    loaded = read_document("ops", "x.md", "/x.md", raw)
    assert isinstance(loaded, LoadedDocument)
    assert loaded.text == body and loaded.document.content_sha256 == hashlib.sha256(body.encode()).hexdigest()
    assert loaded.document.source_sha256 == hashlib.sha256(raw).hexdigest()


@given(text=st.text(max_size=300))
def test_text_without_a_leading_fence_has_no_front_matter(text: str) -> None:
    """A file that does not open with a `---` line is all content: id from its path, no tags."""
    if text.split("\n", 1)[0].removesuffix("\r") == "---":
        return
    front = parse_front_matter(text)
    assert (front.id, front.tags, front.content_offset) == (None, (), 0)


@pytest.mark.parametrize(("block", "reason"), [
    ("---\nid: a\n\n", "line 4: expected"),
    ("---\nowner: me\n---\n", "unknown key 'owner'"),
    ("---\nid: a\nid: b\n---\n", "`id` given twice"),
    ("---\nid: ../etc\n---\n", "id '../etc' must be"),
    ("---\ntags: ops\n---\n", "tags must be a list"),
    ("---\ntags: [a, a]\n---\n", "tag 'a' given twice"),
    ("---\ntags: [a b]\n---\n", "tag 'a b' must be"),
    ("---\n- item\n---\n", "line 2: expected"),
])
def test_front_matter_outside_the_subset_is_an_error_naming_the_line(block: str, reason: str) -> None:
    """Nothing is guessed: an unknown key, a repeat, a bad value or an unclosed block is an error."""
    with pytest.raises(FrontMatterError, match=reason):
        parse_front_matter(block + "body\n")
    problem = read_document("ops", "x.md", "/x.md", (block + "body\n").encode())
    assert isinstance(problem, CorpusProblem) and problem.kind == "bad_front_matter"


def test_an_unclosed_front_matter_block_is_an_error() -> None:
    with pytest.raises(FrontMatterError, match="never closed"):
        parse_front_matter("---\nid: a\ntags: []\n")


def test_invalid_utf8_is_a_problem_naming_the_byte() -> None:
    problem = read_document("ops", "x.md", "/x.md", b"ok\n\xc3\x28")
    assert isinstance(problem, CorpusProblem)
    assert (problem.kind, problem.detail, problem.id) == ("invalid_utf8", "not valid UTF-8 at byte 3", "x.md")
    assert problem.source_sha256 == hashlib.sha256(b"ok\n\xc3\x28").hexdigest()


def _doc(dataset: str, name: str, text: str) -> LoadedDocument:
    loaded = read_document(dataset, name, f"/{dataset}/{name}", text.encode())
    assert isinstance(loaded, LoadedDocument)
    return loaded


def test_manifest_digest_covers_every_document_and_ignores_discovery_order() -> None:
    """Same files in any order: same digest. One changed byte, a renamed file, a new problem: another."""
    docs = [_doc("ops", "a.md", "alpha\n"), _doc("ops", "b.md", "beta\n"), _doc("dev", "c.md", "gamma\n")]
    roots = {"ops": ("/ops",), "dev": ("/dev",)}
    digest = build_corpus(roots, docs, ()).manifest.digest
    assert build_corpus(roots, list(reversed(docs)), ()).manifest.digest == digest
    edited = [_doc("ops", "a.md", "alpha!\n"), *docs[1:]]
    renamed = [_doc("ops", "a2.md", "alpha\n"), *docs[1:]]
    problem = CorpusProblem(dataset="ops", kind="invalid_utf8", source_path="/ops/z.md", detail="byte 0")
    others = {build_corpus(roots, edited, ()).manifest.digest, build_corpus(roots, renamed, ()).manifest.digest,
              build_corpus(roots, docs, (problem,)).manifest.digest}
    assert digest not in others and len(others) == 3
    manifest = build_corpus(roots, docs, ()).manifest
    assert [(d.dataset, d.id) for d in manifest.documents] == [("dev", "c.md"), ("ops", "a.md"), ("ops", "b.md")]


def test_two_documents_claiming_one_id_are_both_left_out_and_reported() -> None:
    one = _doc("ops", "one.md", "---\nid: restart\n---\nx\n")
    two = _doc("ops", "two.md", "---\nid: restart\n---\ny\n")
    corpus = build_corpus({"ops": ("/ops",)}, [one, two, _doc("ops", "c.md", "z\n")], ())
    assert [d.id for d in corpus.manifest.documents] == ["c.md"]
    assert [(p.kind, p.id) for p in corpus.manifest.problems] == [("duplicate_id", "restart")] * 2
    assert "/ops/two.md" in corpus.manifest.problems[0].detail
    assert ("ops", "restart") not in corpus.texts


def test_corpus_changes_name_documents_edited_added_and_removed() -> None:
    """By (dataset, id): a document whose bytes changed is edited, one only before is removed, one only after is
    added; an unchanged one is none of them."""
    before = build_corpus({"ops": ("/ops",)}, [_doc("ops", "a.md", "alpha\n"), _doc("ops", "b.md", "beta\n"),
                                              _doc("ops", "c.md", "gamma\n")], ()).manifest.documents
    after = build_corpus({"ops": ("/ops",)}, [_doc("ops", "a.md", "alpha!\n"), _doc("ops", "b.md", "beta\n"),
                                             _doc("ops", "d.md", "delta\n")], ()).manifest.documents
    changes = corpus_changes(before, after)
    assert (changes.changed, changes.added, changes.removed) == (("ops/a.md",), ("ops/d.md",), ("ops/c.md",))
    notice = change_notice("kn_1", "kn_2", changes)
    assert "manifest kn_1 is now kn_2" in notice and "Documents edited: ops/a.md." in notice
    assert "Documents added: ops/d.md." in notice and "Documents removed: ops/c.md." in notice


def test_a_change_notice_says_what_it_cannot_tell() -> None:
    """Without the previous index the notice says the corpus changed, not which documents; knowledge that appears
    or goes away is said so."""
    assert "cannot be told" in change_notice("kn_1", "kn_2", None)
    assert "available to this session now (manifest kn_2)" in change_notice(None, "kn_2", None)
    assert "no longer available" in change_notice("kn_1", None, None)


def test_query_terms_are_the_tokenizers_words_quoted_never_syntax() -> None:
    """Operators, quotes and column filters in a query are just separators; case and accents fold."""
    assert query_terms('body:"Rotate" OR NEAR(keys) -café* __debug__ rotate') == (
        "body", "rotate", "or", "near", "keys", "cafe", "debug")


@pytest.mark.parametrize(("df", "docs", "share", "counts"), [
    (0, 10, 0.25, False), (1, 10, 0.25, True), (2, 10, 0.25, True), (3, 10, 0.25, False), (1, 1, 0.25, True),
    (2, 2, 0.25, False), (25, 100, 0.25, True), (26, 100, 0.25, False), (42, 100, 0.5, True)])
def test_discriminating_rule(df: int, docs: int, share: float, counts: bool) -> None:
    """A term counts when it is in at least one and at most `share` of the documents (never fewer than one)."""
    assert is_discriminating(df, docs, share) is counts


@given(text=st.text(alphabet=st.sampled_from("ab é\n#`~-"), max_size=3 * SECTION_MAX_BYTES))
def test_sections_cover_the_text_in_order_within_the_size_cap(text: str) -> None:
    """Sections tile the content exactly (no byte lost or repeated), each within the cap and on character
    boundaries."""
    data = text.encode("utf-8")
    ranges = sections(text)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    for start, end in ranges:
        assert end - start <= SECTION_MAX_BYTES
        data[start:end].decode("utf-8")


def test_best_section_is_the_one_holding_the_most_terms() -> None:
    text = "# Intro\nwelcome\n# Keys\nrotate the signing keys\n# Certs\nrotate certs\n"
    start, end = best_section(text, ["rotate", "keys"])
    assert text.encode()[start:end] == b"# Keys\nrotate the signing keys\n"


GRANTS = {"ops": DatasetGrant(name="ops", pii="personal", modes=("interactive", "headless"), source="/u.toml"),
          "hr": DatasetGrant(name="hr", pii="sensitive", modes=("interactive",), source="/u.toml")}


def test_grant_check_names_the_missing_grant() -> None:
    assert check_scope(GRANTS, "ops", "headless") == ("ops",)
    assert check_scope(GRANTS, None, "headless") == ("ops",)
    assert check_scope(GRANTS, None, "interactive") == ("hr", "ops")
    denied = check_scope(GRANTS, "hr", "headless")
    assert isinstance(denied, Miss) and denied.kind == "dataset_denied"
    assert denied.missing_grant == '"headless" in [knowledge.datasets.hr] modes (/u.toml)'
    unknown = check_scope(GRANTS, "finance", "headless")
    assert isinstance(unknown, Miss) and unknown.kind == "unknown_dataset"
    none = check_scope(GRANTS, None, "mcp")
    assert isinstance(none, Miss) and none.kind == "dataset_denied"


def test_tools_pii_class_is_the_highest_granted_to_the_mode() -> None:
    assert pii_of(GRANTS, "interactive") == "sensitive"
    assert pii_of(GRANTS, "headless") == "personal"
    assert pii_of(GRANTS, "mcp") == "none"


def test_answers_round_trip_as_one_tagged_union() -> None:
    miss = Miss(kind="weak_match", reason="r", common_terms=("the",))
    hits = Hits(hits=(), manifest_digest="kn_x")
    assert ANSWER_ADAPTER.validate_json(miss.model_dump_json()) == miss
    assert ANSWER_ADAPTER.validate_json(hits.model_dump_json()) == hits
