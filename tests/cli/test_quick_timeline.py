"""`strata timeline ID` the quick way (agent/cli/quick_timeline.py): the same table as the full way, in a real
process that imports no models, no event loop and no logging, and only when the config files are known valid;
any config file not known valid, a malformed one above all, goes the full way and is reported as before. The full
way it is compared with (`--verbose`) runs in the test's process (tests/_in_process_cli.py)."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import textwrap
from pathlib import Path

import pytest

from agent.cli.timeline_table import fitted_lines
from config.checked import CHECKED_FILE
from tests._in_process_cli import run_in_process, set_up_in_process
from tests.cli._helpers import QUICK_NEVER, result_line, run_noting_modules, text, tool_use
from tests.conftest import StrataCLI, write_script


def _timeline(cli: StrataCLI, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`strata timeline ARGS` through the real entry point; whether it went the quick way."""
    done, loaded = run_noting_modules(cli, ["timeline", *args], tmp_path)
    return done, not loaded & QUICK_NEVER


@pytest.fixture
def session(cli: StrataCLI, workspace: Path, tmp_path: Path) -> str:
    """A session with allowed and denied calls over two turns, recorded by a real `strata run`."""
    (workspace / "a.txt").write_text("alpha\n")
    script = write_script(tmp_path / "turns.json", [
        [tool_use("toolu_ok", "read_file", path="a.txt"),
         tool_use("toolu_scope", "write_file", path="../outside.txt", content="x"),
         tool_use("toolu_policy", "bash", command="rm -rf ."),
         tool_use("toolu_unknown", "launch_rockets", target="moon")],
        [tool_use("toolu_again", "read_file", path="a.txt")],
        [text("done")],
    ])
    run = set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--deny",
                            "bash(rm*)", "--json", "go")
    assert run.returncode == 0, run.stderr
    result = result_line(run.stdout)
    assert result is not None
    return str(result["session_id"])


def test_the_quick_way_prints_exactly_what_the_full_way_prints_for_every_filter(
        cli: StrataCLI, session: str, tmp_path: Path) -> None:
    """`--verbose` always takes the full way: both tables compared byte for byte, filters, prefix and `last`."""
    for args in ([session], [session[:10]], ["last"], [session, "--kind", "call"],
                 [session, "--kind", "call", "--decision", "denied"], [session, "--decision", "allowed"],
                 [session, "--tool", "read_file", "--turn", "2"], [session, "--since", "5"],
                 [session, "--kind", "hook"], [session, "--decision", "parked"],
                 [session, "--since", "2020-01-01T00:00:00"], [session, "--since", "2999-01-01T00:00:00+05:00"]):
        quick, took_quick = _timeline(cli, tmp_path, *args)
        assert quick.returncode == 0 and took_quick, (args, quick.stderr)
        full = run_in_process(cli, "--verbose", "timeline", *args)
        assert full.returncode == 0, (args, full.stderr)
        assert quick.stdout == full.stdout, args
    denied = _timeline(cli, tmp_path, session, "--kind", "call", "--decision", "denied")[0].stdout
    assert "launch_rockets" in denied and "rm -rf" in denied and "alpha" not in denied
    assert "no timeline rows match" in _timeline(cli, tmp_path, session, "--decision", "parked")[0].stdout


def test_errors_and_what_the_quick_way_does_not_draw_go_the_full_way(
        cli: StrataCLI, session: str, tmp_path: Path) -> None:
    for args, code, says in ((["no-such-session-id"], 1, "no-such-session-id"), ([session[:4]], 2, "too short"),
                             ([session, "--kind", "nonsense"], 2, "--kind"),
                             ([session, "--json", "--kind", "nonsense"], 2, "--kind"),
                             ([session, "--verify"], 0, "chain verified"), ([session, "--children"], 0, "timeline of")):
        done, took_quick = _timeline(cli, tmp_path, *args)
        assert (done.returncode, took_quick) == (code, False), (args, done.stderr)
        assert says in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_malformed_user_config_is_reported_whether_or_not_an_earlier_one_was_known_valid(
        cli: StrataCLI, session: str, tmp_path: Path, workspace: Path) -> None:
    user_config = cli.home / "xdg-config" / "strata" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text("max_turns = 40\n", encoding="utf-8")
    # never loaded by a command that writes: not known valid, so the full way reads (and checks) it
    done, took_quick = _timeline(cli, tmp_path, session)
    assert (done.returncode, took_quick) == (0, False), done.stderr
    # a run validates it and remembers its digest (never its contents): from then on the quick way is taken
    script = write_script(tmp_path / "answer.json", [[text("ok")]])
    assert set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                             "hi").returncode == 0
    assert "max_turns" not in (cli.home / CHECKED_FILE).read_text(encoding="utf-8")
    done, took_quick = _timeline(cli, tmp_path, session)
    assert (done.returncode, took_quick) == (0, True), done.stderr
    # edited into something invalid: other bytes, so the full way, which names the file, key and reason
    user_config.write_text("max_turns = 0\n", encoding="utf-8")
    done, took_quick = _timeline(cli, tmp_path, session)
    assert done.returncode == 2 and not took_quick and not done.stdout, done.stdout
    assert str(user_config) in done.stderr and "max_turns" in done.stderr and "Traceback" not in done.stderr


def test_a_session_whose_project_file_is_not_known_valid_goes_the_full_way(
        cli: StrataCLI, session: str, tmp_path: Path, workspace: Path) -> None:
    project = workspace / ".strata" / "config.toml"
    project.parent.mkdir()
    project.write_text('[[rules]]\naction = "permit"\ntool = "bash"\n', encoding="utf-8")
    done, took_quick = _timeline(cli, tmp_path, session)
    assert done.returncode == 2 and not took_quick, done.stderr
    assert str(project) in done.stderr and "Traceback" not in done.stderr


def test_a_user_config_naming_a_postgresql_store_goes_the_full_way(cli: StrataCLI, session: str,
                                                                    tmp_path: Path) -> None:
    """The quick way reads the home's SQLite file only: a user file that names a store (known valid or not)
    sends the command to that store."""
    user_config = cli.home / "xdg-config" / "strata" / "config.toml"
    user_config.parent.mkdir(parents=True, exist_ok=True)
    data = b'db = "postgresql://nobody@127.0.0.1:9/none"\n'
    user_config.write_bytes(data)
    (cli.home / CHECKED_FILE).write_text(json.dumps([f"user:{hashlib.sha256(data).hexdigest()}"]), encoding="utf-8")
    done, took_quick = _timeline(cli, tmp_path, session)
    assert not took_quick and done.returncode != 0 and "Traceback" not in done.stderr, done.stderr


def test_lines_that_fit_are_what_textwrap_gives_them() -> None:
    """The table's shortcut for a summary that fits (agent/cli/timeline_table.py) against textwrap itself."""
    rng = random.Random(5)
    alphabet = "ab c-d\t\u00e9\u4e2d \n" + "x" * 8
    for _ in range(5_000):
        text_ = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        width = rng.randint(20, 40)
        assert fitted_lines(text_, width) == (textwrap.wrap(text_, width, break_on_hyphens=False) or [""]), text_


def test_wrapped_lines_of_words_and_spaces_are_what_textwrap_gives_them() -> None:
    """The table's own wrapping of printable ASCII (agent/cli/timeline_table.py `_greedy`) against textwrap: words
    and runs of spaces of every length around the width (runs ending a line, beginning one, ending the text; words
    and runs wider than a line), and text it leaves to textwrap (a leading space, tabs, other characters)."""
    rng = random.Random(7)
    alphabets = ["ab ", "a b", "abc  -", "xy    ", "a\tb c", "ab\u00e9 ", "a-b c_d", "ab \n", "aaaaa ", "x  y "]
    for _ in range(12_000):
        alphabet = rng.choice(alphabets)
        text_ = "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 2, 3, 5, 10, 30, 100, 300])))
        width = rng.choice([1, 2, 3, 4, 5, 8, 20, 93])
        assert fitted_lines(text_, width) == (textwrap.wrap(text_, width, break_on_hyphens=False) or [""]), \
            (text_, width)


def test_wrapped_lines_of_words_one_space_apart_are_what_textwrap_gives_them() -> None:
    """The table's wrapping of words one space apart (agent/cli/timeline_table.py `_single_spaced`, almost every
    summary) against textwrap: words around the width and wider than a line, a space at the end, a line that ends
    exactly at the width or one before a space."""
    rng = random.Random(11)
    for _ in range(12_000):
        words = ["w" * rng.choice([1, 2, 3, 7, 19, 20, 21, 40, 93, 94]) for _ in range(rng.choice([1, 2, 3, 8, 30]))]
        text_ = " ".join(words) + rng.choice(["", "", " "])
        width = rng.choice([1, 3, 7, 20, 21, 40, 93])
        assert fitted_lines(text_, width) == (textwrap.wrap(text_, width, break_on_hyphens=False) or [""]), \
            (text_, width)


def test_a_workspace_that_cannot_be_looked_at_goes_the_full_way_and_is_one_error_line(
        cli: StrataCLI, session: str, tmp_path: Path) -> None:
    """A recorded workspace whose stat fails with other than "no such file" (here ENAMETOOLONG; EACCES for another
    user) leaves the project layer unknown: the quick way defers, the full way says so in one line (exit 1)."""
    import sqlite3

    unreachable = "/tmp/" + "w" * 300 + "/ws"
    with sqlite3.connect(cli.home / "strata.db") as db:
        db.execute("UPDATE sessions SET workspace = ? WHERE id = ?", (unreachable, session))
    quick, took_quick = _timeline(cli, tmp_path, session)
    full = run_in_process(cli, "--verbose", "timeline", session)
    assert not took_quick and quick.returncode == full.returncode == 1 and not quick.stdout, quick.stderr
    assert quick.stderr.startswith(f"strata: error: cannot look at the workspace '{unreachable}' of session {session}")
    assert "internal error" not in quick.stderr + full.stderr and "Traceback" not in quick.stderr + full.stderr
    assert quick.stderr.splitlines()[-1].startswith("hint: ")


def test_a_session_row_the_store_would_not_read_goes_the_full_way_for_every_reading(
        cli: StrataCLI, session: str, workspace: Path, tmp_path: Path) -> None:
    """Another session's row edited into something the store does not write (a status outside the vocabulary, a
    time that is not ISO text): the quick way must not print a table or a listing there, but leave both to the full
    way, which still shows the sound session by its id (`last` might have been the damaged one: an error) and lists
    it, with one error line naming the damaged one (exit 1)."""
    import sqlite3

    script = write_script(tmp_path / "other.json", [[text("ok")]])
    other = set_up_in_process(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json",
                              "other")
    other_id = str((result_line(other.stdout) or {})["session_id"])
    for column, value in (("status", "weird"), ("created_at", "garbage"), ("fork_seq", "x"), ("mode", "robot")):
        with sqlite3.connect(cli.home / "strata.db") as db:
            before = db.execute(f"SELECT {column} FROM sessions WHERE id = ?", (other_id,)).fetchone()[0]
            db.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, other_id))
        quick, took_quick = _timeline(cli, tmp_path, session)
        full = run_in_process(cli, "--verbose", "timeline", session)
        assert not took_quick and quick.returncode == full.returncode == 0, (column, quick.stderr)
        assert quick.stdout == full.stdout and f"timeline of session {session}" in quick.stdout, column
        quick, took_quick = _timeline(cli, tmp_path, "last")
        full = run_in_process(cli, "--verbose", "timeline", "last")
        assert not took_quick and quick.returncode == full.returncode == 1, (column, quick.stdout)
        assert quick.stdout == full.stdout == "" and f"session {other_id} has a damaged session row" in quick.stderr
        listing, loaded = run_noting_modules(cli, ["sessions"], tmp_path)
        assert loaded & QUICK_NEVER and listing.returncode == 1, column
        assert session in listing.stdout and other_id not in listing.stdout, column
        assert f"session {other_id} has a damaged session row ({column}" in listing.stderr, column
        with sqlite3.connect(cli.home / "strata.db") as db:
            db.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (before, other_id))
    quick, took_quick = _timeline(cli, tmp_path, session)
    assert took_quick and quick.returncode == 0  # the rows as written again: the quick way
