"""config/quick.py: what a reading command's quick way takes from the config is what a full load gives (the home
and the secrets to mask with), and only for files a full load validated (config/checked.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.reading import configured_secrets
from config import load_config
from config.checked import CHECKED_FILE, digest, remember_checked, was_checked
from config.locations import SETTING_KEYS
from config.quick import quick_config

USER_FILE = b'''max_turns = 7

[secrets]
values = ["literal-secret-one", "literal-secret-two"]
env = ["QUICK_TEST_TOKEN", "QUICK_TEST_UNSET"]

[mcp.servers.tracker]
command = "python3"
env = { TRACKER_TOKEN = "server-secret-value", SHORT = "abc" }
'''


def _env(tmp_path: Path) -> dict[str, str]:
    return {"STRATA_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path),
            "QUICK_TEST_TOKEN": "token-from-the-environment"}


def test_the_quick_config_masks_what_a_full_load_masks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path)
    monkeypatch.setenv("QUICK_TEST_TOKEN", env["QUICK_TEST_TOKEN"])  # configured_secrets reads the process's
    (tmp_path / "home").mkdir()
    user = tmp_path / "xdg" / "strata" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_bytes(USER_FILE)
    assert quick_config(env) is None  # not known valid yet
    loaded = load_config(workspace=None, env=env)
    remember_checked(loaded.settings.home, [("user", loaded.user_sha256)])
    quick = quick_config(env)
    assert quick is not None and quick.home == loaded.settings.home and quick.db_path == loaded.settings.db_path
    assert sorted(quick.secrets) == sorted(configured_secrets(loaded))
    assert "server-secret-value" in quick.secrets and "abc" not in quick.secrets
    assert "token-from-the-environment" in quick.secrets


def test_a_setting_in_the_environment_or_an_edited_file_takes_the_full_way(tmp_path: Path) -> None:
    env = _env(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    assert quick_config(env) is not None  # no user file at all
    for key in SETTING_KEYS:
        assert quick_config({**env, f"STRATA_{key.upper()}": "x"}) is None, key
    user = tmp_path / "xdg" / "strata" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_bytes(b"max_turns = 3\n")
    remember_checked(home, [("user", digest(b"max_turns = 3\n"))])
    assert quick_config(env) is not None
    user.write_bytes(b"max_turns = 4\n")
    assert quick_config(env) is None
    assert not was_checked(home, "project", b"max_turns = 3\n")  # a digest is remembered for its role only


def test_the_record_keeps_digests_only_and_survives_damage(tmp_path: Path) -> None:
    remember_checked(tmp_path, [("user", digest(b"secret = 1")), ("project", None)])
    assert "secret" not in (tmp_path / CHECKED_FILE).read_text(encoding="utf-8")
    (tmp_path / CHECKED_FILE).write_text("{not json", encoding="utf-8")
    assert not was_checked(tmp_path, "user", b"secret = 1")
    remember_checked(tmp_path, [("user", digest(b"secret = 1"))])
    assert was_checked(tmp_path, "user", b"secret = 1")
