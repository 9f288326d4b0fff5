"""`strata knowledge` and the knowledge tools against hostile input, with real processes: an id that is not UTF-8
on the command line, an index file damaged while a session reads it, and a project's dataset directory that is a
symlink leading out of the workspace. Each is a miss, a clean error or a reported problem, never a traceback and
never a document read from outside the workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._knowledge_corpus import write_pydoc_topics
from tests.cli._helpers import assert_clean_stderr
from tests.conftest import StrataCLI


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    write_pydoc_topics(root / "pydoc")
    return root


def declare(cli: StrataCLI, corpus: Path) -> None:
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'[knowledge.datasets.pydoc]\npath = "{corpus / "pydoc"}"\n'
                      'modes = ["interactive", "headless"]\n', encoding="utf-8")


def test_get_of_an_id_that_is_not_utf8_is_a_not_found_miss_not_an_internal_error(cli: StrataCLI,
                                                                                corpus: Path) -> None:
    declare(cli, corpus)
    not_utf8 = b"\xff\xfe.txt".decode("utf-8", "surrogateescape")  # argv bytes as Python holds them
    proc = cli.run("knowledge", "get", not_utf8, "--json")
    assert_clean_stderr(proc)
    assert proc.returncode == 1, proc.stderr
    miss = json.loads(proc.stdout)
    assert (miss["result"], miss["kind"]) == ("miss", "not_found"), miss
    plain = cli.run("knowledge", "get", not_utf8)
    assert_clean_stderr(plain)
    assert plain.returncode == 1 and plain.stderr.startswith("strata: miss: not_found"), plain.stderr
