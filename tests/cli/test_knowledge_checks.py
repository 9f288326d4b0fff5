"""`strata config show` and `strata doctor` show the knowledge datasets: what is declared, for which modes, how
many documents were found, the files left out of the index and why (invalid UTF-8, two documents claiming one
id), and dataset directories found but not declared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import strata
from tests.conftest import StrataCLI


@pytest.fixture
def setup(cli: StrataCLI, tmp_path: Path) -> dict[str, str]:
    sops = tmp_path / "sops"
    sops.mkdir()
    (sops / "restart-db.md").write_text("# Restart\n\nDrain first.\n", encoding="utf-8")
    (sops / "latin1.md").write_bytes("caf\xe9 procedure\n".encode("latin-1"))
    (sops / "a.md").write_text("---\nid: rotate\n---\nOne.\n", encoding="utf-8")
    (sops / "b.md").write_text("---\nid: rotate\n---\nTwo.\n", encoding="utf-8")
    config = cli.home / "xdg-config" / "strata" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'[knowledge.datasets.sops]\npath = "{sops}"\nmodes = ["headless"]\n'
                      '[knowledge.datasets.idle]\npath = "~/nowhere"\n', encoding="utf-8")
    data = tmp_path / "xdg-data"
    (data / "strata" / "knowledge" / "loose").mkdir(parents=True)
    (data / "strata" / "knowledge" / "loose" / "x.md").write_text("x\n", encoding="utf-8")
    return {"XDG_DATA_HOME": str(data), "HOME": str(tmp_path / "home")}


def test_config_show_lists_datasets_their_documents_and_what_is_left_out(
        cli: StrataCLI, setup: dict[str, str], workspace: Path) -> None:
    proc = strata(cli, "config", "show", "--workspace", str(workspace), "--json", env=setup)
    assert proc.returncode == 0, proc.stderr
    view = json.loads(proc.stdout)["knowledge"]
    sops = view["datasets"]["sops"]
    assert (sops["modes"], sops["documents"], sops["pii"]) == (["headless"], 1, "internal")
    kinds = sorted(p.split(": ")[2] for p in sops["problems"])
    assert kinds == ["duplicate id", "duplicate id", "invalid utf8"]
    assert [p.split(": ")[2] for p in view["datasets"]["idle"]["problems"]] == ["missing root"]
    assert list(view["undeclared"]) == ["loose"]
    assert view["manifest_digest"].startswith("kn_")

    text = strata(cli, "config", "show", "--workspace", str(workspace), env=setup).stdout.splitlines()
    assert any(line.startswith("  sops: 1 document(s), modes headless") for line in text)
    assert any(line.startswith("    left out: sops: ") and "latin1.md: invalid utf8" in line for line in text)
    assert any(line.startswith("  idle: 0 document(s), modes none (no session may read it)") for line in text)
    assert any(line.startswith("  loose: found at ") and "not declared" in line for line in text)


def test_doctor_warns_of_files_left_out_of_a_dataset_and_of_undeclared_ones(
        cli: StrataCLI, setup: dict[str, str], workspace: Path) -> None:
    proc = cli.run("doctor", "--workspace", str(workspace), env={**setup, "ANTHROPIC_API_KEY": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = {line.split()[2]: line for line in proc.stdout.splitlines() if line.split()[1:2] == ["knowledge"]}
    assert lines["sops"].startswith("warn") and "3 left out of the index" in lines["sops"]
    assert lines["idle"].startswith("warn") and "missing root" in lines["idle"]
    assert lines["loose"].startswith("warn") and "not declared" in lines["loose"]
    assert "Traceback" not in proc.stderr
