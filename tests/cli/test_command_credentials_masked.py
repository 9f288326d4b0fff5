"""Passwords given to a command as options (`curl -u USER:PW`, `curl --user`, `wget --password`, `mysql -pPW`,
`PGPASSWORD=... psql`, `sshpass -p`, an `Authorization` header) in a bash call and in a session's --allow rules:
none reaches an observation surface (timeline, show's session fields, every export, the evidence ledger, the log,
`strata fork`'s message), while the commands around them stay readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli._helpers import result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

# (how it is written, the secret part that must never show)
FORMS = [
    ("curl -u ci:CurlU5erPw https://127.0.0.1:9/a", "CurlU5erPw"),
    ("curl --user ci:CurlL0ngPw https://127.0.0.1:9/a", "CurlL0ngPw"),
    ("curl -H 'Authorization: Basic QmFzaWNIZWFkZXJQdzE=' https://127.0.0.1:9/a", "QmFzaWNIZWFkZXJQdzE="),
    ("curl -H 'Authorization: Bearer BearerHeaderT0k' https://127.0.0.1:9/a", "BearerHeaderT0k"),
    ("wget --password=WgetEqPw9 https://127.0.0.1:9/a", "WgetEqPw9"),
    ("wget --password WgetSpPw9 https://127.0.0.1:9/a", "WgetSpPw9"),
    ("mysql -uroot -pMysqlGlu3dPw app", "MysqlGlu3dPw"),
    ("PGPASSWORD=PgEnvPw77 psql -h 127.0.0.1 app", "PgEnvPw77"),
    ("sshpass -p SshpassPw5 ssh -p 2222 deploy@127.0.0.1", "SshpassPw5"),
]
RULE = ("curl -u rule:RuleCurlPw4 *", "RuleCurlPw4")
READABLE = ["git push -u origin main", "sort -u names.txt"]
EXPORTS = ("jsonl", "html", "otlp")


@pytest.fixture
def session(cli: StrataCLI, tmp_path: Path) -> str:
    ws = tmp_path / "ws"
    ws.mkdir()
    command = "; ".join(f"echo {form}" for form, _ in FORMS)
    script = write_script(tmp_path / "turns.json", [
        [tool_use("b1", "bash", command=command)], [tool_use("b2", "bash", command=FORMS[0][0])],
        [tool_use("b3", "bash", command="; ".join(f"echo {r}" for r in READABLE))], [text("done")]])
    run = strata(cli, "run", "--json", "--model", f"script:{script}", "--workspace", str(ws),
                 "--allow", f"bash({RULE[0]})", "--allow", "bash(echo *)", "connect")
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "completed", (run.stdout, run.stderr)
    return str(summary["session_id"])


def _surfaces(cli: StrataCLI, sid: str, tmp_path: Path) -> dict[str, str]:
    outputs: dict[str, str] = {}
    for name, args in [("timeline", ["timeline", sid]), ("timeline --json", ["timeline", sid, "--json"]),
                       ("fork", ["fork", sid, "--at-turn", "1"]),
                       ("fork --json", ["fork", sid, "--at-turn", "1", "--json"])]:
        done = strata(cli, *args)
        assert done.returncode == 0, (name, done.stderr)
        outputs[name] = done.stdout
    shown = json.loads(strata(cli, "show", sid, "--json").stdout)
    outputs["show --json session fields"] = json.dumps(shown["session"])
    for fmt in EXPORTS:
        out = tmp_path / f"export.{fmt}"
        done = strata(cli, "export", sid, "--format", fmt, "--output", str(out))
        assert done.returncode == 0, done.stderr
        outputs[f"export {fmt}"] = out.read_text(encoding="utf-8")
    outputs["ledger"] = (cli.home / "ledger" / f"{sid}.jsonl").read_text(encoding="utf-8")
    outputs["log"] = (cli.home / "logs" / "strata.log").read_text(encoding="utf-8")
    return outputs


def test_passwords_given_as_command_options_are_masked_on_every_surface(cli: StrataCLI, session: str,
                                                                        tmp_path: Path) -> None:
    outputs = _surfaces(cli, session, tmp_path)
    secrets = [secret for _, secret in FORMS] + [RULE[1]]
    for surface, output in outputs.items():
        assert output.strip(), surface
        leaked = [s for s in secrets if s in output]
        assert leaked == [], (surface, leaked)
    shown = strata(cli, "show", session)  # its messages are the conversation, shown raw
    assert shown.returncode == 0 and RULE[1] not in shown.stdout
    rules_shown = {"fork": outputs["fork"], "export jsonl": outputs["export jsonl"],
                   "show --json session fields": outputs["show --json session fields"]}
    for surface, output in rules_shown.items():
        assert "curl -u rule:[MASKED:secret_field:" in output, surface
    for surface in ("timeline --json", "ledger", "export jsonl"):
        assert "curl -u ci:[MASKED:secret_field:" in outputs[surface], surface
        assert all(r in outputs[surface] for r in READABLE), surface


def test_the_state_log_keeps_the_commands_as_they_ran(cli: StrataCLI, session: str) -> None:
    """The conversation is not masked (by design): the checks above are not vacuous."""
    conversation = strata(cli, "show", session, "--json").stdout
    assert all(secret in conversation for _, secret in FORMS)
