"""A path written `~name/...` for a user this system does not have (a typo for `~/name`), in STRATA_HOME, an XDG
variable or a config path, is one error line naming where it was written; each was an internal error
("RuntimeError: Could not determine home directory") on every command, the quick read-only ones included."""

from __future__ import annotations

import pytest

from tests.cli._helpers import error_lines, strata
from tests.conftest import StrataCLI

NOBODY = "~strata-no-such-user"


@pytest.mark.parametrize("variable", ["STRATA_HOME", "XDG_CONFIG_HOME"])
@pytest.mark.parametrize("command", [("config", "show"), ("sessions",), ("export", "last")],
                         ids=["config_show", "sessions", "export"])
def test_an_environment_path_for_an_unknown_user_is_one_error_naming_the_variable(
        cli: StrataCLI, variable: str, command: tuple[str, ...]) -> None:
    proc = strata(cli, *command, env={variable: f"{NOBODY}/strata"})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (line,) = error_lines(proc.stderr)
    assert line == (f"strata: error: environment variable {variable}: '{NOBODY}/strata' starts with {NOBODY}, but "
                    f"there is no user '{NOBODY[1:]}' (write ~/ for your own home)")


@pytest.mark.parametrize(("table", "key"), [
    ('[knowledge.datasets.sops]\npath = "~strata-no-such-user/sops"\nmodes = ["interactive"]\n',
     "knowledge.datasets.sops.path"),
    ('[[channels]]\nname = "ops"\nkind = "spool"\ninbox = "~strata-no-such-user/in"\noutbox = "/tmp/out"\n'
     'workspace = "/tmp"\n',
     "channels.ops.inbox"),
])
def test_a_config_path_for_an_unknown_user_is_one_error_naming_the_file_and_key(cli: StrataCLI, table: str,
                                                                                  key: str) -> None:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(table)
    for command in (("config", "show"), ("knowledge", "list")):
        proc = strata(cli, *command)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        (line,) = error_lines(proc.stderr)
        assert line.startswith(f"strata: error: file {path}, key {key}: '{NOBODY}/"), line
        assert line.endswith(f"starts with {NOBODY}, but there is no user '{NOBODY[1:]}' (write ~/ for your own "
                             "home)"), line


def test_a_workspace_or_copy_target_for_an_unknown_user_is_a_usage_error_saying_so(cli: StrataCLI) -> None:
    """The shell leaves `~name` alone when there is no such user, so Strata gets it as written."""
    shown = f"'{NOBODY}/x' starts with {NOBODY}, but there is no user '{NOBODY[1:]}' (write ~/ for your own home)"
    proc = strata(cli, "config", "show", "--workspace", f"{NOBODY}/x")
    assert proc.returncode == 2, proc.stdout
    assert f"Invalid value for '--workspace': workspace {shown}" in proc.stderr, proc.stderr
    copy = strata(cli, "db", "copy", "--to", f"{NOBODY}/x")
    assert copy.returncode == 2, copy.stdout
    assert error_lines(copy.stderr) == [f"strata: error: --to: {shown}"], copy.stderr
