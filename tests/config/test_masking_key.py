"""masking key: created once per home (hex, mode 0600, atomically), read back unchanged, shared by processes that
race to create it, and a malformed file is a ConfigError naming the file."""

from __future__ import annotations

import os
import stat
import sys
import threading
from pathlib import Path

import pytest

from config import _key_file
from config.masking_key import KEY_FILE, load_masking_key
from core.errors import ConfigError


def test_first_use_creates_a_private_hex_key(tmp_path: Path) -> None:
    """A missing key file is created: 32 random bytes as 64 hex characters, readable only by the owner."""
    key = load_masking_key(tmp_path)
    path = tmp_path / KEY_FILE
    assert len(key) == 32
    assert path.read_text(encoding="ascii").strip() == key.hex()
    if sys.platform != "win32":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]  # no temporary file left behind


def test_key_is_stable_across_loads_and_distinct_across_homes(tmp_path: Path) -> None:
    """The same home gives the same key every time; another home gets its own."""
    first = load_masking_key(tmp_path / "a")
    assert load_masking_key(tmp_path / "a") == first
    assert load_masking_key(tmp_path / "b") != first


def test_existing_key_is_read_as_is(tmp_path: Path) -> None:
    """A key written by hand (surrounding whitespace allowed) is used as it is."""
    (tmp_path / KEY_FILE).write_text("  " + "ab" * 32 + "\n\n", encoding="ascii")
    assert load_masking_key(tmp_path) == bytes.fromhex("ab" * 32)


@pytest.mark.parametrize("content", ["", "not hex at all", "ab" * 31, "ab" * 33, "zz" * 32, "\xff\xfe"])
def test_malformed_key_is_a_config_error_naming_the_file(tmp_path: Path, content: str) -> None:
    """A truncated, over-long or non-hex key file is refused, naming the file, and is not replaced."""
    path = tmp_path / KEY_FILE
    path.write_text(content, encoding="latin-1")
    with pytest.raises(ConfigError) as info:
        load_masking_key(tmp_path)
    assert str(path) in str(info.value)
    assert info.value.file == str(path)
    assert info.value.hint
    assert path.read_text(encoding="latin-1") == content


def test_unreadable_key_path_is_a_config_error(tmp_path: Path) -> None:
    """A directory where the key file should be is reported as a config error, not a traceback."""
    (tmp_path / KEY_FILE).mkdir()
    with pytest.raises(ConfigError, match="cannot read the masking key"):
        load_masking_key(tmp_path)


def test_losing_a_creation_race_reads_the_winners_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If another process creates the file between our check and our link, its key is used, not ours."""
    theirs = "cd" * 32
    real_link = os.link

    def other_process_wins(src: os.PathLike[str], dst: os.PathLike[str]) -> None:
        Path(dst).write_text(theirs + "\n", encoding="ascii")
        real_link(src, dst)

    monkeypatch.setattr(_key_file.os, "link", other_process_wins)
    assert load_masking_key(tmp_path) == bytes.fromhex(theirs)
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]


def test_without_hard_links_the_key_is_created_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a filesystem without hard links, the key file is created exclusively in place."""

    def no_links(src: os.PathLike[str], dst: os.PathLike[str]) -> None:
        raise OSError("operation not permitted")

    monkeypatch.setattr(_key_file.os, "link", no_links)
    key = load_masking_key(tmp_path)
    assert load_masking_key(tmp_path) == key
    assert [p.name for p in tmp_path.iterdir()] == [KEY_FILE]


def test_concurrent_first_loads_agree_on_one_key(tmp_path: Path) -> None:
    """Many threads loading a fresh home at once all get the same key."""
    keys: list[bytes] = []
    barrier = threading.Barrier(8)

    def load() -> None:
        barrier.wait()
        keys.append(load_masking_key(tmp_path))

    threads = [threading.Thread(target=load) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1
    assert (tmp_path / KEY_FILE).read_text(encoding="ascii").strip() == keys[0].hex()
