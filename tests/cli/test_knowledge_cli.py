"""`strata knowledge` through the real process: list, search, get and rebuild over real corpora (pydoc topics and
this README split by heading), deterministic output, exact bytes, explicit misses as one line and a hint, and a
denied or undeclared dataset refused before the index is touched."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memory.knowledge import INDEX_DIR
from tests._knowledge_corpus import sha256_file, write_pydoc_topics, write_readme_sections
from tests.conftest import StrataCLI


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    write_pydoc_topics(root / "pydoc")
    write_readme_sections(root / "readme")
    return root


def declare(cli: StrataCLI, corpus: Path, extra: str = "") -> None:
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[knowledge.datasets.pydoc]\npath = "{corpus / "pydoc"}"\npii = "none"\n'
                      'modes = ["interactive", "headless"]\n'
                      f'[knowledge.datasets.readme]\npath = "{corpus / "readme"}"\nmodes = ["daemon"]\n{extra}',
                      encoding="utf-8")


def run(cli: StrataCLI, *args: str) -> tuple[int, str, str]:
    proc = cli.run("knowledge", *args, env={"XDG_DATA_HOME": str(cli.home / "xdg-data")})
    return proc.returncode, proc.stdout, proc.stderr


def test_search_finds_the_distinctive_document_first_identically_on_every_run(
        cli: StrataCLI, corpus: Path, tmp_path: Path) -> None:
    """The same query prints the same bytes: twice, after `rebuild`, and in a fresh home with its own index."""
    declare(cli, corpus)
    code, first, err = run(cli, "search", "AssertionError __debug__", "--json", "--limit", "5")
    assert code == 0, err
    answer = json.loads(first)
    assert answer["result"] == "hits"
    assert (answer["hits"][0]["dataset"], answer["hits"][0]["id"]) == ("pydoc", "assert.txt")
    assert run(cli, "search", "AssertionError __debug__", "--json", "--limit", "5")[1] == first
    code, out, err = run(cli, "rebuild", "--json")
    assert code == 0, err
    assert json.loads(out)["documents"] == len(list((corpus / "pydoc").iterdir())) + len(
        list((corpus / "readme").iterdir()))
    assert run(cli, "search", "AssertionError __debug__", "--json", "--limit", "5")[1] == first
    fresh = StrataCLI(tmp_path / "fresh-home", cli.cwd)
    fresh.home.mkdir()
    declare(fresh, corpus)
    assert run(fresh, "search", "AssertionError __debug__", "--json", "--limit", "5")[1] == first
    code, text, _ = run(cli, "search", "AssertionError __debug__")
    assert code == 0 and text.startswith("1. pydoc/assert.txt (lexical, score ")


def test_get_prints_the_exact_document_with_digests_matching_the_file(cli: StrataCLI, corpus: Path) -> None:
    declare(cli, corpus)
    code, out, err = run(cli, "get", "doc:nonlocal.txt", "--json", "--mode", "headless")
    assert code == 0, err
    (hit,) = json.loads(out)["hits"]
    path = corpus / "pydoc" / "nonlocal.txt"
    assert hit["text"].encode("utf-8") == path.read_bytes()
    assert hit["content_sha256"] == hit["source_sha256"] == sha256_file(path)
    assert hashlib.sha256(hit["text"].encode("utf-8")).hexdigest() == sha256_file(path)
    assert hit["method"] == "exact" and hit["byte_range"] == [0, path.stat().st_size]


@pytest.mark.parametrize("query", ["the of and", "python"])
def test_common_word_queries_are_a_weak_match_miss_in_one_line(cli: StrataCLI, corpus: Path, query: str) -> None:
    declare(cli, corpus)
    code, out, err = run(cli, "search", query, "--dataset", "pydoc")
    assert code == 1 and out == ""
    assert err.splitlines()[0].startswith("strata: miss: weak_match: no discriminating term: ")
    assert err.splitlines()[1].startswith("hint: ") and len(err.splitlines()) == 2
    code, out, _ = run(cli, "search", query, "--dataset", "pydoc", "--json")
    miss = json.loads(out)
    assert code == 1 and (miss["result"], miss["kind"]) == ("miss", "weak_match")
    assert set(miss["common_terms"]) == set(query.split())


@pytest.mark.parametrize(("args", "kind", "grant"), [
    (("search", "nonlocal", "--dataset", "manuals"), "unknown_dataset", "[knowledge.datasets.manuals]"),
    (("get", "readme/hooks", "--dataset", "readme"), "dataset_denied", '"interactive" in [knowledge.datasets.readme]'),
    (("search", "nonlocal", "--mode", "mcp"), "dataset_denied", 'modes = ["mcp"]'),
])
def test_undeclared_and_denied_datasets_are_refused_before_the_index_is_touched(
        cli: StrataCLI, corpus: Path, args: tuple[str, ...], kind: str, grant: str) -> None:
    """The refusal names the missing grant; the index is never built or opened (its directory does not exist)."""
    declare(cli, corpus)
    code, out, err = run(cli, *args)
    assert code == 1 and out == ""
    assert err.startswith(f"strata: miss: {kind}: ") and "Traceback" not in err
    code, out, _ = run(cli, *args, "--json")
    miss = json.loads(out)
    assert code == 1 and miss["kind"] == kind and grant in miss["missing_grant"]
    assert not (cli.home / INDEX_DIR).exists()


def test_list_reports_invalid_utf8_duplicate_ids_and_undeclared_datasets(cli: StrataCLI, tmp_path: Path) -> None:
    """Nothing is dropped in silence: each problem is listed with its file and reason, and a lookup of it is a
    miss that says why."""
    sops = tmp_path / "sops"
    sops.mkdir()
    (sops / "broken.md").write_bytes(b"drain \xff\n")
    (sops / "a.md").write_text("---\nid: drain\n---\ndrain the queue\n", encoding="utf-8")
    (sops / "b.md").write_text("---\nid: drain\n---\ndrain the pool\n", encoding="utf-8")
    (sops / "ok.md").write_text("rotate keys\n", encoding="utf-8")
    (cli.home / "xdg-data" / "strata" / "knowledge" / "stray").mkdir(parents=True)
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[knowledge.datasets.sops]\npath = "{sops}"\nmodes = ["interactive"]\n', encoding="utf-8")
    code, out, err = run(cli, "list", "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    problems = sorted((r["kind"], Path(r["source_path"]).name) for r in rows if r["type"] == "problem")
    assert problems == [("duplicate_id", "a.md"), ("duplicate_id", "b.md"), ("invalid_utf8", "broken.md")]
    assert [r["name"] for r in rows if r["type"] == "undeclared"] == ["stray"]
    (dataset,) = [r for r in rows if r["type"] == "dataset"]
    assert (dataset["name"], dataset["documents"], dataset["modes"]) == ("sops", 1, ["interactive"])
    code, out, err = run(cli, "list")
    assert code == 0 and "3 problem(s), left out of the index:" in out and "not valid UTF-8 at byte 6" in out
    code, _, err = run(cli, "get", "drain")
    assert code == 1 and err.startswith("strata: notice: 3 file(s) are left out of the index")
    assert "strata: miss: ambiguous_id: 2 documents claim id 'drain'" in err


def test_bad_knowledge_config_is_one_line_and_exit_2(cli: StrataCLI, corpus: Path) -> None:
    declare(cli, corpus, '[knowledge.datasets.extra]\nmodes = ["everywhere"]\n')
    code, out, err = run(cli, "search", "nonlocal")
    assert code == 2 and out == ""
    assert err.startswith("strata: error: file ") and "key knowledge.datasets.extra.modes[0]: must be one of" in err
    assert "Traceback" not in err
