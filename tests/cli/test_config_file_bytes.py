"""A config file saved with a UTF-8 byte order mark (as some editors on Windows do) is one error line that says
so: the mark is invisible, and TOML's own "Invalid statement (at line 1, column 1)" points at nothing one can see."""

from __future__ import annotations

from tests.cli._helpers import error_lines, strata
from tests.conftest import StrataCLI


def test_a_config_file_with_a_byte_order_mark_is_an_error_that_names_the_mark(cli: StrataCLI) -> None:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xef\xbb\xbfmax_turns = 5\n")
    proc = strata(cli, "config", "show")
    assert proc.returncode == 2, proc.stdout
    (line,) = error_lines(proc.stderr)
    assert line == (f"strata: error: file {path}: starts with a byte order mark (U+FEFF), which TOML does not "
                    "allow: save it as UTF-8 without one")
