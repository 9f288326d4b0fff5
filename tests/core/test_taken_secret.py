"""`take_secret` (core/env_block.py) in a real process: the variable leaves os.environ (no child inherits it) and
the startup block the kernel shows, its value stays with the process for its later readers, and a masker built
from the environment afterwards still knows it (it no longer finds it there)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SECRET = "fake-model-key-0123456789abcdef"

CHILD = textwrap.dedent("""
    import json, os, subprocess, sys
    from core.env_block import take_secret
    from core.masking import Masker

    first = take_secret("ANTHROPIC_API_KEY")
    again = take_secret("ANTHROPIC_API_KEY")
    shown = open("/proc/self/environ", "rb").read()
    inherited = subprocess.run([sys.executable, "-c", "import os; print(os.environ.get('ANTHROPIC_API_KEY'))"],
                               capture_output=True, text=True).stdout.strip()
    masked = Masker.from_env(b"k" * 32, os.environ).mask("the key is " + first)
    print(json.dumps({"first": first, "again": again, "in_environ": "ANTHROPIC_API_KEY" in os.environ,
                      "shown": os.fsdecode(shown), "inherited": inherited, "masked": masked,
                      "never_set": take_secret("STRATA_TEST_NEVER_SET")}))
""")


def test_a_taken_secret_leaves_the_environment_and_the_startup_block_and_stays_with_the_process() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": SECRET,
                               "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["first"] == out["again"] == SECRET  # kept for every later reader
    assert out["in_environ"] is False and out["inherited"] == "None"
    assert SECRET not in out["shown"] and "ANTHROPIC_API_KEY=" in out["shown"]  # blanked in place, name kept
    assert "ANTHROPIC_BASE_URL=http://127.0.0.1:9" in out["shown"]  # not a secret: left as it was
    assert SECRET not in out["masked"] and "[MASKED:" in out["masked"]
    assert out["never_set"] is None


SERVE = textwrap.dedent("""
    import json, os
    from agent.mcp_serve._auth import bearer_token
    from core.masking import Masker

    token = bearer_token("STRATA_TEST_MCP_TOKEN", None)
    masked = Masker.from_env(b"k" * 32, os.environ).mask("the token is " + token)
    print(json.dumps({"in_environ": "STRATA_TEST_MCP_TOKEN" in os.environ, "masked": masked,
                      "shown": os.fsdecode(open("/proc/self/environ", "rb").read())}))
""")


def test_the_mcp_serve_token_taken_from_the_environment_is_still_masked_by_maskers_built_after() -> None:
    """`strata mcp serve --http` takes its bearer token out of its environment; a session's masker built later
    (from the environment) must still know it, so a token that shows in a result or row is masked."""
    token = "fake-serve-token-0123456789abcdef"
    proc = subprocess.run([sys.executable, "-c", SERVE], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "STRATA_TEST_MCP_TOKEN": token})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["in_environ"] is False and token not in out["shown"]
    assert token not in out["masked"] and "[MASKED:" in out["masked"]
