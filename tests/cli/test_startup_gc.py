"""A command's modules are imported with the cyclic garbage collector paused (agent/cli/startup_gc.py: it would
walk the import's long-lived objects again and again, ~80 ms of `strata resume`), and the command's work runs with
it enabled, so a long session still collects its cycles."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import REPO, StrataCLI, write_script


def _run_watching_the_collector(cli: StrataCLI, args: list[str], tmp_path: Path) -> dict[str, object]:
    report = tmp_path / "gc.json"
    probe = (
        "import atexit, gc, json, sys\n"
        "seen = {'at_start': gc.isenabled()}\n"
        "def dump():\n"
        f"    with open({str(report)!r}, 'w') as out:\n"
        "        out.write(json.dumps({**seen, 'at_exit': gc.isenabled()}))\n"
        "atexit.register(dump)\n"
        f"sys.argv = ['strata', *{args!r}]\n"
        "import agent.cli.main as m\n"
        "settle = m.startup_gc.settle\n"
        "def watched():\n"
        "    seen['during_import'] = gc.isenabled()\n"
        "    settle()\n"
        "    seen['after_import'] = gc.isenabled()\n"
        "    seen['frozen'] = gc.get_freeze_count()\n"
        "m.cli._after_import = watched\n"
        "m.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads(report.read_text(encoding="utf-8"))
    return seen


def test_resume_imports_its_modules_with_the_collector_paused_and_works_with_it_enabled(
        cli: StrataCLI, tmp_path: Path) -> None:
    script = write_script(tmp_path / "turns.json", [])
    ran = cli.run("run", "--json", "--model", f"script:{script}", "hello")
    assert ran.returncode == 0, ran.stderr
    sid = json.loads(ran.stdout.splitlines()[-1])["session_id"]

    seen = _run_watching_the_collector(cli, ["resume", sid, "one more"], tmp_path)
    assert seen["at_start"] is True
    assert seen["during_import"] is False
    assert seen["after_import"] is True and isinstance(seen["frozen"], int) and seen["frozen"] > 10_000
    assert seen["at_exit"] is True


def test_help_leaves_the_collector_enabled_although_it_imports_no_command(cli: StrataCLI, tmp_path: Path) -> None:
    seen = _run_watching_the_collector(cli, ["--help"], tmp_path)
    assert "during_import" not in seen
    assert seen["at_start"] is True and seen["at_exit"] is True


def _collector_at_imports(cli: StrataCLI, tmp_path: Path, start: str) -> list[list[object]]:
    """Whether the collector was enabled when `click` and `agent.cli.main` were first imported by `start` (a
    `strata --help` run as the program's entry runs it, or a plain import)."""
    report = tmp_path / "imports.json"
    probe = (
        "import atexit, gc, importlib.abc, json, runpy, sys\n"
        "seen = []\n"
        "class Watch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name in ('click', 'agent.cli.main'):\n"
        "            seen.append([name, gc.isenabled()])\n"
        "        return None\n"
        "sys.meta_path.insert(0, Watch())\n"
        f"atexit.register(lambda: open({str(report)!r}, 'w').write(json.dumps(seen)))\n"
        "sys.argv = ['strata', '--help']\n"
        + start
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=cli.cwd, env=cli.env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    seen: list[list[object]] = json.loads(report.read_text(encoding="utf-8"))
    return seen


def test_the_program_imports_the_command_line_itself_with_the_collector_paused(cli: StrataCLI,
                                                                                tmp_path: Path) -> None:
    """`python -m agent` and the console script pause the collector before agent/cli/main.py and click are imported
    (agent/cli/entry.py), not only before the command's module; importing agent.cli.main as a library leaves it
    alone."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    module, function = scripts["strata"].split(":")
    paused = [["agent.cli.main", False], ["click", False]]
    assert _collector_at_imports(cli, tmp_path, "runpy.run_module('agent', run_name='__main__')\n") == paused
    assert _collector_at_imports(cli, tmp_path, f"from {module} import {function}\n{function}()\n") == paused
    assert _collector_at_imports(cli, tmp_path, "import agent.cli.main\n") == [["agent.cli.main", True],
                                                                                ["click", True]]
