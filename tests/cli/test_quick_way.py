"""The frame every quick way runs in (agent/cli/quick_way.py `answer_quickly`), against a real home made by a real
`strata run`: the answer is printed only once the database is closed; a store error, a row not as the store writes
it, a file that cannot be looked at, or the reading's own "not sure" leave the command to the full way with nothing
printed and the database closed; any other error is a bug and is raised, the database closed all the same."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent.cli.quick_way import answer_quickly
from config.quick import QuickConfig
from memory.quick_read import QuickRead
from tests.cli._helpers import scripted_session
from tests.conftest import StrataCLI


@pytest.fixture
def home_with_a_session(cli: StrataCLI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A home holding one session, made this process's environment (the quick way reads its config from there)."""
    (tmp_path / "scripts").mkdir()
    session_id = scripted_session(cli, tmp_path / "scripts")
    for name in [n for n in os.environ if n.startswith("STRATA_")]:
        monkeypatch.delenv(name)
    for name, value in cli.env().items():
        monkeypatch.setenv(name, value)
    yield session_id


def _closed(db: QuickRead) -> bool:
    try:
        db.session_rows()
    except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
        return True
    return False


def test_the_answer_is_printed_once_the_database_is_closed(home_with_a_session: str) -> None:
    seen: list[object] = []

    def read(config: QuickConfig, db: QuickRead) -> Callable[[], None]:
        ids = [row.id for row, _ in db.session_rows()]
        return lambda: seen.append((ids, _closed(db)))

    assert answer_quickly(read) is True
    assert seen == [([home_with_a_session], True)]


@pytest.mark.parametrize("error", [sqlite3.OperationalError("database is locked"),
                                   sqlite3.DatabaseError("file is not a database"),
                                   ValueError("a row not as the store writes it"),
                                   PermissionError(13, "Permission denied")])
def test_an_error_the_full_way_reports_leaves_the_command_to_it(home_with_a_session: str,
                                                                  error: Exception) -> None:
    opened: list[QuickRead] = []

    def read(config: QuickConfig, db: QuickRead) -> Callable[[], None]:
        opened.append(db)
        raise error

    assert answer_quickly(read) is False
    assert len(opened) == 1 and _closed(opened[0])


def test_a_reading_not_sure_of_its_answer_leaves_the_command_to_the_full_way(home_with_a_session: str) -> None:
    opened: list[QuickRead] = []

    def read(config: QuickConfig, db: QuickRead) -> None:
        opened.append(db)
        return None

    assert answer_quickly(read) is False
    assert len(opened) == 1 and _closed(opened[0])


def test_a_bug_in_a_reading_is_raised_with_the_database_closed(home_with_a_session: str) -> None:
    opened: list[QuickRead] = []

    def read(config: QuickConfig, db: QuickRead) -> None:
        opened.append(db)
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        answer_quickly(read)
    assert len(opened) == 1 and _closed(opened[0])


def test_a_home_without_a_database_is_left_to_the_full_way_unread(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("STRATA_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("STRATA_HOME", str(tmp_path / "empty-home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    called: list[bool] = []

    def read(config: QuickConfig, db: QuickRead) -> None:
        called.append(True)

    assert answer_quickly(read) is False
    assert called == []
