"""A webhook's `callback_url` is checked when the config is loaded: http or https, a host, a port that is a number
in range, no blanks. A malformed one stops `strata serve` before it listens with one line naming the file, the
key and the reason, and never the URL itself (its query or user part may carry a token)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels._support import write_config
from tests.cli._helpers import text
from tests.conftest import StrataCLI
from tests.serve._procs import script

SECRET = "s3cr3t-callback-token"


@pytest.mark.parametrize(("url", "reason"), [
    (f"ftp://user:{SECRET}@example.test/hook", "http or https"),
    (f"http://:{SECRET}@/hook?token={SECRET}", "host"),
    (f"http://example.test:99999/hook?token={SECRET}", "port"),
    (f"http://example.test:abc/hook?token={SECRET}", "port"),
    (f"http://[::1/hook?token={SECRET}", "host"),
    (f"https://example.test/hook?token={SECRET}\\tx", "blank"),
])
def test_a_malformed_callback_url_stops_serve_naming_file_key_and_reason_but_never_the_url(
        cli: StrataCLI, tmp_path: Path, url: str, reason: str) -> None:
    model = script(tmp_path / "s.json", [text("hi")])
    write_config(cli, f'[[channels]]\nname = "hook"\nkind = "webhook"\nport = 1\ntoken_env = "HOOK_TOKEN"\n'
                 f'workspace = "{tmp_path}"\nmodel = "{model}"\ncallback_url = "{url}"\n')
    proc = cli.run("serve", "--foreground", env={"HOOK_TOKEN": "t" * 20}, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "config.toml" in proc.stderr and "callback_url" in proc.stderr and reason in proc.stderr, proc.stderr
    assert SECRET not in proc.stderr and SECRET not in proc.stdout
    assert "Traceback" not in proc.stderr
