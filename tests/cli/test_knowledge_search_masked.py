"""`strata knowledge search` prints excerpts of indexed documents: a secret a document holds is masked there as in
every other output (the home's masker: same fingerprint on every run), and it is not remembered as session text."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import StrataCLI

TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def test_a_secret_inside_an_indexed_document_is_masked_in_search_output(cli: StrataCLI, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "deploy.md").write_text(f"Deploy runbook\n\nTo deploy, export GITHUB_TOKEN={TOKEN} and run the "
                                      "rollout script.\n", encoding="utf-8")
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[knowledge.datasets.ops]\npath = "{corpus}"\npii = "none"\nmodes = ["headless"]\n',
                      encoding="utf-8")
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg-data")}

    text = cli.run("knowledge", "search", "rollout deploy", "--mode", "headless", env=env)
    assert text.returncode == 0, text.stderr
    assert TOKEN not in text.stdout
    (line,) = [ln for ln in text.stdout.splitlines() if "GITHUB_TOKEN=" in ln]
    assert "GITHUB_TOKEN=[MASKED:github_token:" in line
    assert cli.run("knowledge", "search", "rollout deploy", "--mode", "headless", env=env).stdout == text.stdout

    as_json = cli.run("knowledge", "search", "rollout deploy", "--mode", "headless", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    (hit,) = json.loads(as_json.stdout)["hits"]
    assert TOKEN not in as_json.stdout and "[MASKED:github_token:" in hit["text"]
    assert not (cli.home / "masking.seen").exists()
