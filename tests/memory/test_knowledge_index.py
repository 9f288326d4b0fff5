"""The knowledge index over real public corpora (CPython's pydoc topics and this README split by heading), in a
real SQLite file in a real home: distinctive terms rank the right document first, identically on every run and
on a fresh index; exact lookup returns bytes whose digests match the file; common words are weak matches; a
denied or undeclared dataset is refused before the index is touched; broken files are reported and are misses."""

from __future__ import annotations

import hashlib
import inspect
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.knowledge import Corpus, DatasetGrant, Hits, Miss, tokens
from memory.knowledge import INDEX_DIR, IndexRow, KnowledgeIndex, KnowledgeService, LexicalOutcome, load_corpus
from tests._knowledge_corpus import REPO, sha256_file, write_pydoc_topics, write_readme_sections

SHARE = 0.25
MODES = ("interactive", "headless")


def grants(*names: str, modes: tuple[str, ...] = MODES) -> dict[str, DatasetGrant]:
    return {n: DatasetGrant(name=n, pii="internal", modes=modes, source="test config") for n in names}  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    write_pydoc_topics(root / "pydoc")
    write_readme_sections(root / "readme")
    return root


def corpus_of(root: Path) -> Corpus:
    return load_corpus({"pydoc": (root / "pydoc",), "readme": (root / "readme",)})


def service(home: Path, corpus: Corpus, *, granted: dict[str, DatasetGrant] | None = None) -> KnowledgeService:
    return KnowledgeService(grants=granted if granted is not None else grants("pydoc", "readme"),
                            index=KnowledgeIndex(home, corpus), common_term_share=SHARE)


class CountingIndex:
    """The real index, counting every lookup, so a test can assert that a refusal never reached it."""

    def __init__(self, inner: KnowledgeIndex) -> None:
        self.inner = inner
        self.corpus = inner.corpus
        self.calls = 0

    def lexical(self, datasets: Sequence[str], terms: Sequence[str], share: float, limit: int) -> LexicalOutcome:
        self.calls += 1
        return self.inner.lexical(datasets, terms, share, limit)

    def exact(self, datasets: Sequence[str], doc_id: str) -> tuple[IndexRow, ...]:
        self.calls += 1
        return self.inner.exact(datasets, doc_id)


DISTINCTIVE = [
    ("AssertionError __debug__", "pydoc", "assert.txt"),
    ("breakpoint pdb debugger", "pydoc", "debugger.txt"),
    ("lambda anonymous", "pydoc", "lambda.txt"),
    ("nonlocal", "pydoc", "nonlocal.txt"),
    ("PYTHONSAFEPATH planted", "readme", "readme/hooks"),
    ("SIGKILL CHANGELOG release", "readme", "readme/quick-start"),
    ("umask chmod 0700", "readme", "readme/where-data-lives"),
]


def test_corpus_reads_every_document_of_both_datasets(corpus_dir: Path) -> None:
    """Every pydoc topic and every README section is a document, with no problem reported."""
    import pydoc_data.topics

    manifest = corpus_of(corpus_dir).manifest
    counts = {d.name: d.documents for d in manifest.datasets}
    assert counts["pydoc"] == len(pydoc_data.topics.topics)
    assert counts["readme"] == len(list((corpus_dir / "readme").iterdir())) > 10
    assert manifest.problems == ()


@pytest.mark.parametrize(("query", "dataset", "expected"), DISTINCTIVE)
def test_distinctive_terms_rank_the_expected_document_first(tmp_path: Path, corpus_dir: Path, query: str,
                                                            dataset: str, expected: str) -> None:
    """A query of distinctive words finds its document first, across all granted datasets."""
    answer = service(tmp_path / "home", corpus_of(corpus_dir)).search(query, mode="headless")
    assert isinstance(answer, Hits), answer
    first = answer.hits[0]
    assert (first.dataset, first.id, first.method) == (dataset, expected, "lexical")
    assert first.score is not None and first.score > 0 and first.matched_terms


def test_search_output_is_identical_on_every_run_and_on_a_fresh_index(tmp_path: Path, corpus_dir: Path) -> None:
    """Same corpus, same answers, byte for byte: twice on one index, and on an index built in another home."""
    corpus = corpus_of(corpus_dir)
    first = service(tmp_path / "a", corpus)
    fresh = service(tmp_path / "b", corpus_of(corpus_dir))
    queries = [q for q, _, _ in DISTINCTIVE] + ["assignment statement target", "exception handler traceback"]
    for query in queries:
        once = first.search(query, mode="headless", limit=10).model_dump_json()
        assert first.search(query, mode="headless", limit=10).model_dump_json() == once
        assert fresh.search(query, mode="headless", limit=10).model_dump_json() == once
    assert (tmp_path / "a" / INDEX_DIR).is_dir() and (tmp_path / "b" / INDEX_DIR).is_dir()


def test_ties_break_by_dataset_then_id(tmp_path: Path) -> None:
    """Identical documents in two datasets score the same; they come out dataset first, then id."""
    for ds in ("beta", "alpha"):
        for name in ("b.md", "a.md"):
            (tmp_path / ds).mkdir(exist_ok=True)
            (tmp_path / ds / name).write_text("rotate the signing keys quarterly\n", encoding="utf-8")
        (tmp_path / ds / "other.md").write_text("unrelated text about lunch\n", encoding="utf-8")
        (tmp_path / ds / "more.md").write_text("more unrelated text\n", encoding="utf-8")
        (tmp_path / ds / "last.md").write_text("still nothing relevant\n", encoding="utf-8")
        (tmp_path / ds / "end.md").write_text("the end\n", encoding="utf-8")
        (tmp_path / ds / "x.md").write_text("x\n", encoding="utf-8")
        (tmp_path / ds / "y.md").write_text("y\n", encoding="utf-8")
    corpus = load_corpus({"beta": (tmp_path / "beta",), "alpha": (tmp_path / "alpha",)})
    svc = KnowledgeService(grants=grants("alpha", "beta"), index=KnowledgeIndex(tmp_path / "home", corpus),
                           common_term_share=SHARE)
    answer = svc.search("signing keys", mode="headless", limit=10)
    assert isinstance(answer, Hits)
    assert [(h.dataset, h.id) for h in answer.hits] == [("alpha", "a.md"), ("alpha", "b.md"), ("beta", "a.md"),
                                                         ("beta", "b.md")]
    assert len({h.score for h in answer.hits}) == 1


def test_get_returns_exact_bytes_whose_sha256_matches_the_file(tmp_path: Path, corpus_dir: Path) -> None:
    """`doc:<id>` returns the document whole: its text is the file's bytes (pydoc: no front-matter) or the bytes
    after the front-matter (README sections), and both digests check against the file."""
    svc = service(tmp_path / "home", corpus_of(corpus_dir))
    path = corpus_dir / "pydoc" / "assert.txt"
    answer = svc.get("doc:assert.txt", mode="headless")
    assert isinstance(answer, Hits)
    (hit,) = answer.hits
    raw = path.read_bytes()
    assert hit.method == "exact" and hit.text.encode("utf-8") == raw
    assert hit.content_sha256 == hit.source_sha256 == sha256_file(path) == hashlib.sha256(raw).hexdigest()
    assert hit.byte_range == (0, len(raw)) and hit.source_path == str(path)

    section = next((corpus_dir / "readme").glob("*-hooks.md"))
    answer = svc.get("readme/hooks", mode="headless", dataset="readme")
    assert isinstance(answer, Hits)
    (hit,) = answer.hits
    raw = section.read_bytes()
    start, end = hit.byte_range
    assert hit.source_sha256 == sha256_file(section)
    assert raw[start:end] == hit.text.encode("utf-8") and end == len(raw) and start > 0
    assert hit.content_sha256 == hashlib.sha256(raw[start:]).hexdigest()
    assert hit.tags == ("readme", "strata")


def test_a_lexical_hit_quotes_its_section_with_a_byte_range_into_the_file(tmp_path: Path, corpus_dir: Path) -> None:
    """A lexical hit's text is exactly the bytes its range names in the source file, and holds the matched terms."""
    answer = service(tmp_path / "home", corpus_of(corpus_dir)).search("augmented assignment", mode="headless")
    assert isinstance(answer, Hits)
    for hit in answer.hits:
        raw = Path(hit.source_path).read_bytes()
        start, end = hit.byte_range
        assert raw[start:end] == hit.text.encode("utf-8")
        assert hashlib.sha256(raw).hexdigest() == hit.source_sha256
        assert set(hit.matched_terms) & set(tokens(hit.text))


@pytest.mark.parametrize(("query", "dataset"), [("the of and", "pydoc"), ("python", "pydoc"), ("the of and", None),
                                                 ("python", None)])
def test_common_word_queries_are_weak_matches(tmp_path: Path, corpus_dir: Path, query: str,
                                              dataset: str | None) -> None:
    """Stop words and near-universal words do not count: the answer is a weak-match miss naming them."""
    answer = service(tmp_path / "home", corpus_of(corpus_dir)).search(query, mode="headless", dataset=dataset)
    assert isinstance(answer, Miss)
    assert answer.kind == "weak_match"
    assert set(answer.common_terms) == set(query.split())


def test_a_word_in_no_document_is_not_found(tmp_path: Path, corpus_dir: Path) -> None:
    """A query whose words are nowhere is `not_found`, not a weak match and not a list of arbitrary documents."""
    answer = service(tmp_path / "home", corpus_of(corpus_dir)).search("zyzzyvaquux", mode="headless")
    assert isinstance(answer, Miss) and answer.kind == "not_found"


@pytest.mark.parametrize("lookup", ["search", "get"])
def test_undeclared_and_denied_datasets_are_refused_before_lookup(tmp_path: Path, corpus_dir: Path,
                                                                  lookup: str) -> None:
    """An undeclared dataset and one not granted to the mode are refused, naming the missing grant, and neither
    the index nor its file is touched."""
    corpus = corpus_of(corpus_dir)
    home = tmp_path / "home"
    counting = CountingIndex(KnowledgeIndex(home, corpus))
    granted = {**grants("pydoc"), **grants("readme", modes=("daemon",))}
    svc = KnowledgeService(grants=granted, index=counting, common_term_share=SHARE)

    def ask(dataset: str | None, mode: str) -> Hits | Miss:
        if lookup == "search":
            return svc.search("nonlocal", mode=mode, dataset=dataset)  # type: ignore[arg-type]
        return svc.get("assert.txt", mode=mode, dataset=dataset)  # type: ignore[arg-type]

    undeclared = ask("manuals", "headless")
    assert isinstance(undeclared, Miss) and undeclared.kind == "unknown_dataset"
    assert undeclared.missing_grant == '[knowledge.datasets.manuals] modes = ["headless"]'
    denied = ask("readme", "headless")
    assert isinstance(denied, Miss) and denied.kind == "dataset_denied"
    assert denied.missing_grant == '"headless" in [knowledge.datasets.readme] modes (test config)'
    nothing = ask(None, "mcp")
    assert isinstance(nothing, Miss) and nothing.kind == "dataset_denied"
    assert counting.calls == 0
    assert not (home / INDEX_DIR).exists()

    allowed = ask("pydoc", "headless")
    assert isinstance(allowed, Hits) and counting.calls == 1


def test_a_session_without_a_manifest_gets_no_manifest(tmp_path: Path) -> None:
    """With no manifest there is nothing to cite: an explicit `no_manifest` miss, after the grant check."""
    svc = KnowledgeService(grants=grants("pydoc"), index=None, common_term_share=SHARE)
    answer = svc.search("nonlocal", mode="headless")
    assert isinstance(answer, Miss) and answer.kind == "no_manifest"
    denied = svc.search("nonlocal", mode="mcp")
    assert isinstance(denied, Miss) and denied.kind == "dataset_denied"


def test_a_dataset_declared_after_the_manifest_was_built_is_no_manifest(tmp_path: Path, corpus_dir: Path) -> None:
    """A grant for a dataset the session's manifest does not hold cannot be served: `no_manifest`, never an
    empty answer that reads like "nothing there"."""
    corpus = load_corpus({"pydoc": (corpus_dir / "pydoc",)})
    svc = KnowledgeService(grants=grants("pydoc", "later"), index=KnowledgeIndex(tmp_path / "home", corpus),
                           common_term_share=SHARE)
    for answer in (svc.get("x.md", mode="headless", dataset="later"), svc.search("nonlocal", mode="headless",
                                                                                 dataset="later")):
        assert isinstance(answer, Miss) and answer.kind == "no_manifest"
    found = svc.search("nonlocal", mode="headless")
    assert isinstance(found, Hits) and {h.dataset for h in found.hits} == {"pydoc"}


def test_invalid_utf8_and_duplicate_ids_are_reported_and_are_misses(tmp_path: Path) -> None:
    """A file that is not UTF-8 and two files claiming one id are in the manifest's problems, not indexed, and
    looking them up answers a miss that says why."""
    root = tmp_path / "sops"
    root.mkdir()
    (root / "broken.md").write_bytes(b"restart the frobnicator\n\xff\xfe not text\n")
    (root / "one.md").write_text("---\nid: restart\n---\nrestart the widget service\n", encoding="utf-8")
    (root / "two.md").write_text("---\nid: restart\n---\nrestart the gadget service\n", encoding="utf-8")
    (root / "fine.md").write_text("drain the queue before a deploy\n", encoding="utf-8")
    (root / "bad-front.md").write_text("---\nid: x\nowner: me\n---\nbody\n", encoding="utf-8")
    corpus = load_corpus({"sops": (root,)})
    kinds = sorted((p.kind, Path(p.source_path).name) for p in corpus.manifest.problems)
    assert kinds == [("bad_front_matter", "bad-front.md"), ("duplicate_id", "one.md"), ("duplicate_id", "two.md"),
                     ("invalid_utf8", "broken.md")]
    assert [d.id for d in corpus.manifest.documents] == ["fine.md"]
    svc = KnowledgeService(grants=grants("sops"), index=KnowledgeIndex(tmp_path / "home", corpus),
                           common_term_share=SHARE)

    ambiguous = svc.get("doc:restart", mode="headless")
    assert isinstance(ambiguous, Miss) and ambiguous.kind == "ambiguous_id"
    assert sorted(Path(c).name for c in ambiguous.candidates) == ["one.md", "two.md"]
    broken = svc.get("broken.md", mode="headless")
    assert isinstance(broken, Miss) and broken.kind == "not_found" and "not valid UTF-8 at byte 24" in broken.reason
    for word in ("frobnicator", "widget", "gadget"):
        missed = svc.search(word, mode="headless")
        assert isinstance(missed, Miss) and missed.kind == "not_found"


def test_the_same_id_in_two_granted_datasets_is_ambiguous_unless_the_dataset_is_named(tmp_path: Path) -> None:
    """`get` never picks one of two documents in silence."""
    for ds in ("ops", "dev"):
        (tmp_path / ds).mkdir()
        (tmp_path / ds / "deploy.md").write_text(f"deploy procedure of {ds}\n", encoding="utf-8")
    corpus = load_corpus({"ops": (tmp_path / "ops",), "dev": (tmp_path / "dev",)})
    svc = KnowledgeService(grants=grants("ops", "dev"), index=KnowledgeIndex(tmp_path / "home", corpus),
                           common_term_share=SHARE)
    answer = svc.get("deploy.md", mode="headless")
    assert isinstance(answer, Miss) and answer.kind == "ambiguous_id"
    assert answer.candidates == ("dev/deploy.md", "ops/deploy.md")
    named = svc.get("deploy.md", mode="headless", dataset="ops")
    assert isinstance(named, Hits) and named.hits[0].text == "deploy procedure of ops\n"


def test_the_index_is_rebuilt_when_the_manifest_digest_changes(tmp_path: Path) -> None:
    """An edited document gives a new digest and a new index file; the old answers stay with the old digest."""
    root = tmp_path / "sops"
    root.mkdir()
    doc = root / "rotate.md"
    doc.write_text("rotate the signing keys\n", encoding="utf-8")
    (root / "other.md").write_text("unrelated\n", encoding="utf-8")
    home = tmp_path / "home"
    before = load_corpus({"sops": (root,)})
    old = KnowledgeIndex(home, before)
    assert old.ensure() is not None and old.ensure() is None
    doc.write_text("rotate the signing keys and the certificates\n", encoding="utf-8")
    after = load_corpus({"sops": (root,)})
    assert after.manifest.digest != before.manifest.digest
    new = KnowledgeIndex(home, after)
    assert new.path != old.path and new.ensure() is not None
    assert new.exact(["sops"], "rotate.md")[0].text.endswith("certificates\n")
    assert old.exact(["sops"], "rotate.md")[0].text == "rotate the signing keys\n"


def test_index_file_is_private(tmp_path: Path, corpus_dir: Path) -> None:
    """The index holds the documents' text: 0600 in a 0700 directory, whatever the umask."""
    old = os.umask(0)
    try:
        index = KnowledgeIndex(tmp_path / "home", corpus_of(corpus_dir))
        index.ensure()
    finally:
        os.umask(old)
    assert stat.S_IMODE(index.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(index.directory.stat().st_mode) == 0o700


BUILD_AND_HANG = """
import sys, time, sqlite3
from pathlib import Path
from memory.knowledge import KnowledgeIndex, load_corpus
import memory.knowledge._index as module

real = module.KnowledgeIndex._build
def slow(self, path):
    real(self, path)
    print("built", flush=True)
    time.sleep(60)  # killed here: the whole index is written but not yet in place
module.KnowledgeIndex._build = slow
corpus = load_corpus({"pydoc": (Path(sys.argv[1]),)})
KnowledgeIndex(Path(sys.argv[2]), corpus).rebuild()
"""


def test_a_build_killed_midway_leaves_readers_the_previous_whole_index(tmp_path: Path, corpus_dir: Path) -> None:
    """A rebuild killed with SIGKILL before it is in place leaves the complete index of before, which a reader
    keeps using; no half-built file is ever at the index's name."""
    home = tmp_path / "home"
    corpus = load_corpus({"pydoc": (corpus_dir / "pydoc",)})
    index = KnowledgeIndex(home, corpus)
    index.ensure()
    before = index.path.read_bytes()
    with subprocess.Popen([sys.executable, "-c", BUILD_AND_HANG, str(corpus_dir / "pydoc"), str(home)], cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "built"
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    assert index.path.read_bytes() == before
    reader = KnowledgeService(grants=grants("pydoc"), index=KnowledgeIndex(home, corpus), common_term_share=SHARE)
    answer = reader.search("nonlocal", mode="headless")
    assert isinstance(answer, Hits) and answer.hits[0].id == "nonlocal.txt"
    leftovers = [p.name for p in (home / INDEX_DIR).iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) == 1  # the killed build's own file, removed by a later build once it is an hour old
    old = time.time() - 7200
    os.utime(home / INDEX_DIR / leftovers[0], (old, old))
    index.rebuild()
    assert not [p for p in (home / INDEX_DIR).iterdir() if p.name.endswith(".tmp")]


def test_a_reader_with_the_index_open_keeps_its_whole_view_while_it_is_replaced(tmp_path: Path,
                                                                                 corpus_dir: Path) -> None:
    """Replacing the file under an open reader (a rebuild, a prune) never shows it a half-written index."""
    import sqlite3

    corpus = load_corpus({"pydoc": (corpus_dir / "pydoc",)})
    index = KnowledgeIndex(tmp_path / "home", corpus)
    index.ensure()
    reader = sqlite3.connect(index.path.as_uri() + "?mode=ro&immutable=1", uri=True)
    try:
        count = reader.execute("SELECT count(*) FROM docs").fetchone()
        index.rebuild()
        index.path.unlink()
        assert reader.execute("SELECT count(*) FROM docs").fetchone() == count
    finally:
        reader.close()
    again = KnowledgeService(grants=grants("pydoc"), index=index, common_term_share=SHARE).get("assert.txt",
                                                                                                 mode="headless")
    assert isinstance(again, Hits)  # a missing index file is rebuilt from the corpus on demand


WORDS = ["rotate", "keys", "drain", "queue", "deploy", "restart", "the", "and", "cache", "certs"]
DOCS = st.dictionaries(st.sampled_from(["ops", "dev"]), st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join), min_size=1, max_size=8),
    min_size=1)


@settings(max_examples=25, deadline=None)
@given(docs=DOCS, query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
       share=st.sampled_from([0.25, 0.5, 1.0]))
def test_ranking_is_deterministic_ordered_and_only_by_discriminating_terms(docs: dict[str, list[str]], query: str,
                                                                           share: float) -> None:
    """Any small corpus, any query: two fresh indexes answer byte for byte alike; hits are best first with ties by
    dataset then id; each holds a term that is in no more than `share` of its dataset's documents."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for dataset, texts in docs.items():
            (root / dataset).mkdir()
            for number, text in enumerate(texts):
                (root / dataset / f"d{number}.md").write_text(text + "\n", encoding="utf-8")
        roots = {d: (root / d,) for d in docs}
        answers = [KnowledgeService(grants=grants(*docs), index=KnowledgeIndex(root / home, load_corpus(roots)),
                                    common_term_share=share).search(query, mode="headless", limit=20)
                   for home in ("a", "b")]
        assert answers[0].model_dump_json() == answers[1].model_dump_json()
        answer = answers[0]
        if isinstance(answer, Miss):
            assert answer.kind in ("weak_match", "not_found")
            return
        keys = [(-(h.score or 0.0), h.dataset, h.id) for h in answer.hits]
        assert keys == sorted(keys)
        for hit in answer.hits:
            texts = docs[hit.dataset]
            for term in hit.matched_terms:
                frequency = sum(term in t.split() for t in texts)
                assert 0 < frequency <= max(share * len(texts), 1)
                assert term in hit.text.split()


def test_a_tree_deeper_than_the_recursion_limit_is_read_whole(tmp_path: Path) -> None:
    """The walk keeps its own stack: a document further down than the interpreter's recursion limit allows frames
    is read (os.walk recursed once per level: a tree about 1,000 deep was an internal error of every command and
    session reading the dataset). The limit is lowered here so that the tree, and its cleanup, stay small."""
    root = tmp_path / "ops"
    deep = root
    for _ in range(400):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "bottom.md").write_text("---\nid: bottom\n---\nthe abyssal procedure\n", encoding="utf-8")
    (root / "top.md").write_text("the surface procedure\n", encoding="utf-8")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 250)  # room for reading a document, not for 400 nested levels
    try:
        corpus = load_corpus({"ops": (root,)})
    finally:
        sys.setrecursionlimit(limit)
    assert corpus.manifest.problems == ()
    assert sorted((d.id, d.filename) for d in corpus.manifest.documents) == [
        ("bottom", "d/" * 400 + "bottom.md"), ("top.md", "top.md")]
