"""A home remembers the known secrets its sessions were seen to hold (and only those), so a later process that
lacks them in its environment masks them too."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

from config.seen_secrets import SEEN_FILE, SeenSecrets, home_masker
from tests.cli._helpers import strata
from tests.conftest import StrataCLI

TOKEN = "s3cr3t-value-" + "q" * 20


def test_a_known_secret_found_in_text_is_remembered_for_the_next_process(tmp_path: Path) -> None:
    masker = home_masker(tmp_path, {"MY_SERVICE_TOKEN": TOKEN})
    assert not (tmp_path / SEEN_FILE).exists()  # in the environment only: nothing written
    assert TOKEN not in masker.mask("nothing here")
    assert TOKEN not in masker.mask(f"echo {TOKEN}")
    assert stat.S_IMODE((tmp_path / SEEN_FILE).stat().st_mode) == 0o600
    later = home_masker(tmp_path, {})  # another shell: the variable is not set
    assert later.mask(f"the token is {TOKEN}.") == masker.mask(f"the token is {TOKEN}.")
    assert TOKEN not in later.mask(f"the token is {TOKEN}.")


def test_each_value_is_written_once_even_from_many_threads(tmp_path: Path) -> None:
    seen = SeenSecrets(tmp_path)
    threads = [threading.Thread(target=lambda: [seen.add(v) for v in ("alpha-value", "beta-value")] * 50)
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(SeenSecrets(tmp_path).values) == ["alpha-value", "beta-value"]


def test_a_damaged_file_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    (tmp_path / SEEN_FILE).write_text('"kept-value"\nnot json\n7\n"also-kept"\n', "utf-8")
    assert SeenSecrets(tmp_path).values == ["kept-value", "also-kept"]


def test_a_line_nested_too_deep_to_read_is_skipped_and_every_command_still_runs(cli: StrataCLI,
                                                                                tmp_path: Path) -> None:
    """A damaged line of arrays nested 100,000 deep raised RecursionError from json.loads, which is not a
    ValueError: every command of the home (`strata sessions` too) failed with an internal error."""
    cli.home.mkdir(parents=True, exist_ok=True)
    (cli.home / SEEN_FILE).write_text('"kept-value"\n' + "[" * 100_000 + "]" * 100_000 + '\n"also-kept"\n', "utf-8")
    assert SeenSecrets(cli.home).values == ["kept-value", "also-kept"]
    proc = strata(cli, "sessions")
    assert proc.returncode == 0, proc.stderr
