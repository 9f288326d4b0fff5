"""Bash patterns against a real `strata run`: an allow pattern cannot be stretched to another command, a deny
pattern sees through what the command reader understands (wrappers, quoting, `bash -c`, paths of the command
word), a command whose command word cannot be read asks, and what the reader cannot see is documented, not
pretended. Every attack runs as the model would send it, against real files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli._helpers import assert_clean_stderr, call_results, events_of, result_line, text, tool_use
from tests.conftest import REPO, StrataCLI, write_script


def _run(cli: StrataCLI, workspace: Path, tmp_path: Path, commands: dict[str, str], *flags: str
         ) -> dict[str, dict[str, Any]]:
    """One headless run whose single batch holds one bash call per command; the call results by call id."""
    script = write_script(tmp_path / "turns.json", [
        [tool_use(call_id, "bash", command=command) for call_id, command in commands.items()],
        [text("done")],
    ])
    run = cli.run("run", "--model", f"script:{script}", "--workspace", str(workspace), *flags, "--json", "go")
    assert_clean_stderr(run)
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "completed", (run.stdout[-3000:], run.stderr[-3000:])
    results = call_results(events_of(run.stdout))
    assert set(results) == set(commands), sorted(results)
    return results


def _victims(workspace: Path, *names: str) -> None:
    for name in names:
        (workspace / name).write_text("keep me\n")


def test_a_leading_assignment_does_not_stretch_an_allow_pattern(cli: StrataCLI, workspace: Path,
                                                                tmp_path: Path) -> None:
    """`--allow 'bash(ls*)'`: `ls=1 rm -f FILE` and `lsX=1 touch FILE` ask (denied headless, with the reason the
    pattern could not apply); nothing is removed or created, while a plain `ls` still runs."""
    _victims(workspace, "victim")
    results = _run(cli, workspace, tmp_path, {
        "rm": "ls=1 rm -f victim",
        "touch": "lsX=1 touch created",
        "plain": "ls -1",
    }, "--allow", "bash(ls*)")
    assert (workspace / "victim").exists()
    assert not (workspace / "created").exists()
    for call_id in ("rm", "touch"):
        result = results[call_id]
        assert (result["status"], result["check"]) == ("denied", "policy"), result
        why = " ".join(result["reasons"])
        assert "allow pattern cannot apply" in why and "assignment" in why, why
        assert "no person to approve it in headless mode" in why, why
    assert results["plain"]["status"] == "ok" and "victim" in results["plain"]["content"], results["plain"]


SEEN_THROUGH = {
    "abs_path": "/bin/rm -f v_abs",
    "usr_bin_env": "/usr/bin/env rm -f v_usr_env",
    "env_opts": "env -i rm -f v_env",
    "env_more": "env -u HOME -i FOO=1 rm -f v_env_more",
    "command_p": "command -p rm -f v_command",
    "continuation": "r\\\nm -f v_continuation",
    "single_quotes": "'r'm -f v_single",
    "double_quotes": '"r"m -f v_double',
    "escape": "r\\m -f v_escape",
    "bash_c": "bash -c 'rm -f v_bash_c'",
    "sh_c": 'sh -c "rm -f v_sh_c"',
    "bash_ec": "bash -ec 'true; rm -f v_bash_ec'",
    "nested_c": "bash -c \"sh -c 'rm -f v_nested'\"",
    "xargs": "echo v_xargs | xargs rm -f",
    "xargs_opts": "echo v_xargs_opts | xargs -n 1 -I{} rm -f {}",
    "find_exec": "find . -name v_find -exec rm -f {} \\;",
    "nice": "nice -n 5 rm -f v_nice",
    "timeout": "timeout -s KILL 5 rm -f v_timeout",
    "nohup": "nohup rm -f v_nohup",
    "exec": "exec rm -f v_exec",
    "stdbuf": "stdbuf -o0 rm -f v_stdbuf",
    "sudo": "sudo -u root rm -f v_sudo",
    "in_substitution": "echo $(rm -f v_subst)",
    "after_keyword": "if true; then rm -f v_if; fi",
    "eval_literal": "eval 'rm -f v_eval'",
}
"""Attacks that removed files under `--deny 'bash(rm*)'`: each is now denied by that rule."""

UNREADABLE = {
    "variable": "c=rm; $c -f v_variable",
    "substituted_word": "$(echo rm) -f v_substituted",
    "eval_variable": "c='rm -f v_eval_variable'; eval \"$c\"",
    "source": "source ./rm_it.sh",
    "piped_to_sh": "echo 'rm -f v_piped' | sh",
    "glob_word": "/bin/r? -f v_glob",
}
"""Commands whose command word the reader cannot see: they ask (denied with no person), naming the rule."""

LIMITS = {
    "find_delete": "find . -name v_find_delete -delete",
    "python_c": "python3 -c 'import os; os.remove(\"v_python\")'",
    "script": "sh ./rm_script.sh",
}
"""What no reading of the command line can see (the README says so): these still run under the deny rule."""


def test_a_deny_pattern_sees_through_wrappers_quoting_and_shells(cli: StrataCLI, workspace: Path,
                                                                 tmp_path: Path) -> None:
    """`--allow bash --deny 'bash(rm*)'`: every spelling of `rm` the reader sees through is denied by the rule and
    its file survives; a command word it cannot read asks, naming the rule; the documented limits still run."""
    victims = [f"v_{k}" for k in ("abs", "usr_env", "env", "env_more", "command", "continuation", "single",
                                  "double", "escape", "bash_c", "sh_c", "bash_ec", "nested", "xargs", "xargs_opts",
                                  "find", "nice", "timeout", "nohup", "exec", "stdbuf", "sudo", "subst", "if",
                                  "variable", "substituted", "eval", "eval_variable", "sourced", "piped", "glob",
                                  "find_delete", "python", "script")]
    _victims(workspace, *victims)
    (workspace / "rm_it.sh").write_text("rm -f v_sourced\n")
    (workspace / "rm_script.sh").write_text("rm -f v_script\n")
    results = _run(cli, workspace, tmp_path, {**SEEN_THROUGH, **UNREADABLE, **LIMITS},
                   "--allow", "bash", "--deny", "bash(rm*)")
    for call_id in SEEN_THROUGH:
        result = results[call_id]
        assert (result["status"], result["check"]) == ("denied", "policy"), (call_id, result)
        assert "denied by deny rule 'bash(rm*)'" in result["reasons"][0], (call_id, result)
    for call_id in UNREADABLE:
        result = results[call_id]
        assert (result["status"], result["check"]) == ("denied", "policy"), (call_id, result)
        why = " ".join(result["reasons"])
        assert "deny rule 'bash(rm*)'" in why and "cannot see" in why, (call_id, why)
    kept = [v for v in victims if v not in ("v_find_delete", "v_python", "v_script")]
    assert [v for v in kept if not (workspace / v).exists()] == []
    for call_id in LIMITS:
        assert results[call_id]["status"] == "ok", (call_id, results[call_id])
    assert not any((workspace / v).exists() for v in ("v_find_delete", "v_python", "v_script"))


def test_the_readme_names_what_a_deny_pattern_cannot_see() -> None:
    """The limits shown to run above are the ones the README's guarantees name, with the safe alternative."""
    readme = (REPO / "README.md").read_text()
    guarantees = readme.split("## Guarantees, and what they do not cover", 1)[1].split("\n## ", 1)[0]
    for limit in ("find -delete", "python -c", "a script", "not a sandbox", "do not allow `bash`"):
        assert limit in guarantees, limit


def test_a_nul_byte_in_a_command_is_a_denial(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """A NUL byte in a bash command is denied before dispatch with a reason, not a crashed handler."""
    results = _run(cli, workspace, tmp_path, {"nul": "touch made\u0000; touch also"}, "--allow", "bash")
    result = results["nul"]
    assert (result["status"], result["check"]) == ("denied", "policy"), result
    assert "NUL" in " ".join(result["reasons"]), result
    assert "crashed" not in result["content"]
    assert not (workspace / "made").exists() and not (workspace / "also").exists()
