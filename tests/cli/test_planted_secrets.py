"""Planted secrets end to end: a scripted `strata run` reads a file full of secrets and PII and copies one of them
with write_file. The state log keeps them raw (it is what the model saw and what resume replays), but none may
reach an observation surface: the evidence ledger, `strata timeline` (table and --json), the log file and the
verbose log on stderr, and `strata export` in each format."""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

URL_SAFE = string.ascii_letters + string.digits + "-_"
ALNUM = string.ascii_letters + string.digits
EXPORT_FORMATS = ("jsonl", "html", "otlp")
SURFACES = ["run stderr (--verbose logs)", "strata timeline", "strata timeline --json", "ledger", "log file",
            *(f"strata export --format {fmt}" for fmt in EXPORT_FORMATS)]


@dataclass(frozen=True)
class Planted:
    name: str
    line: str
    """How it is written in the planted file."""
    secret: str
    """The part that must never show (for a PEM block its body, for a URL its password)."""


def _luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def planted_secrets(rng: random.Random) -> list[Planted]:
    def pick(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    anthropic = "sk-ant-api03-" + pick(URL_SAFE, 80)
    openai = "sk-proj-7" + pick(URL_SAFE, 47)
    aws = "AKIA" + pick(string.ascii_uppercase + string.digits, 16)
    github = "ghp_" + pick(ALNUM, 36)
    slack = f"xoxb-{pick(string.digits, 11)}-{pick(string.digits, 13)}-{pick(ALNUM, 24)}"
    payload = base64.urlsafe_b64encode(json.dumps({"sub": pick(ALNUM, 12), "admin": True}).encode()).rstrip(b"=")
    jwt = f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{payload.decode()}.{pick(URL_SAFE, 43)}"
    pem_body = "\n".join(pick(string.ascii_letters + string.digits + "+/", 64) for _ in range(5))
    pem = f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----"
    password = "Pw-" + pick(ALNUM, 16)
    email = f"planted.{pick(string.ascii_lowercase, 8)}@example.com"
    card_digits = "4" + pick(string.digits, 14)
    card_digits += _luhn_digit(card_digits)
    card = " ".join(card_digits[i:i + 4] for i in range(0, 16, 4))
    return [
        Planted("anthropic", f"anthropic {anthropic}", anthropic),
        Planted("openai", f"openai: {openai}", openai),
        Planted("aws", f"aws {aws}", aws),
        Planted("github", f"github {github}", github),
        Planted("slack", f"slack {slack}", slack),
        Planted("jwt", f"session {jwt}", jwt.split(".", 1)[1]),
        Planted("pem", pem, pem_body),
        Planted("url", "db https://user:hunter2pass@host/x", "hunter2pass"),
        Planted("password", f"password={password}", password),
        Planted("email", f"contact {email}", email),
        Planted("card", f"card {card}", card),
        Planted("card_digits", "", card_digits),  # not planted this way: it must not show unspaced either
    ]


def leaks(output: str, planted: list[Planted]) -> list[str]:
    """Every planted secret found whole, or by a 20-character piece of it (a secret cut in two before masking)."""
    found = []
    for p in planted:
        pieces = {p.secret} | {p.secret[i:i + 20] for i in range(0, max(1, len(p.secret) - 20), 10)
                               if len(p.secret) > 30}
        pieces |= {line for line in p.secret.splitlines() if len(line) >= 20}
        if any(piece in output for piece in pieces):
            found.append(p.name)
    return found


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[StrataCLI, str, list[Planted], dict[str, str]]:
    root = tmp_path_factory.mktemp("planted")
    home, ws = root / "home", root / "ws"
    home.mkdir()
    ws.mkdir()
    cli = StrataCLI(home, root)
    planted = planted_secrets(random.Random(20260101))
    (ws / "planted.txt").write_text("\n".join(p.line for p in planted if p.line) + "\n", encoding="utf-8")
    anthropic = planted[0].secret
    # Where a one-line summary would cut: a private key block first in a file, a key across the 100th character.
    (ws / "pem.txt").write_text(next(p.line for p in planted if p.name == "pem") + "\n", encoding="utf-8")
    (ws / "cut.txt").write_text("x" * 70 + f" {anthropic}\n", encoding="utf-8")
    script = write_script(root / "script.json", [
        [text("reading it"), tool_use("r1", "read_file", path="planted.txt"),
         tool_use("r2", "read_file", path="pem.txt"), tool_use("r3", "read_file", path="cut.txt")],
        [tool_use("w1", "write_file", path="copy.txt", content=f"key: {anthropic}\n"),
         tool_use("b1", "bash", command=f"echo {planted[2].secret}")],
        [text("done")],
    ])
    run = strata(cli, "--verbose", "run", "--model", f"script:{script}", "--workspace", str(ws),
                 "--allow", "write_file", "--json", "copy the key")
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "completed", (run.stdout, run.stderr)
    sid = summary["session_id"]
    outputs = {"run stderr (--verbose logs)": run.stderr}
    table = strata(cli, "timeline", sid)
    assert table.returncode == 0, table.stderr
    outputs["strata timeline"] = table.stdout
    as_json = strata(cli, "timeline", sid, "--json")
    assert as_json.returncode == 0, as_json.stderr
    outputs["strata timeline --json"] = as_json.stdout
    for fmt in EXPORT_FORMATS:
        out = root / f"export.{fmt}"
        exported = strata(cli, "export", sid, "--format", fmt, "--output", str(out))
        assert exported.returncode == 0, exported.stderr
        outputs[f"strata export --format {fmt}"] = out.read_text(encoding="utf-8")
    outputs["ledger"] = (home / "ledger" / f"{sid}.jsonl").read_text(encoding="utf-8")
    outputs["log file"] = (home / "logs" / "strata.log").read_text(encoding="utf-8")
    assert (ws / "copy.txt").read_text() == f"key: {anthropic}\n"
    return cli, sid, planted, outputs



@pytest.mark.parametrize("surface", SURFACES)
def test_no_planted_secret_reaches_the_surface(session: tuple[StrataCLI, str, list[Planted], dict[str, str]],
                                               surface: str) -> None:
    """No planted secret, whole or in a long piece, shows on this observation surface."""
    _, _, planted, outputs = session
    assert outputs[surface].strip(), f"{surface} is empty: the check would prove nothing"
    assert leaks(outputs[surface], planted) == []


def test_the_secrets_did_flow_through_the_session(session: tuple[StrataCLI, str, list[Planted],
                                                                 dict[str, str]]) -> None:
    """The state log holds the raw content the model saw, so the checks above are not vacuous; the observation
    surfaces show mask tokens where the secrets were."""
    cli, sid, planted, outputs = session
    (view,) = json_lines_in_process(cli, "show", sid, "--json")
    conversation = json.dumps(view, ensure_ascii=False)
    assert sorted(leaks(conversation, planted)) == sorted(p.name for p in planted if p.line)
    ledger = [json.loads(line) for line in outputs["ledger"].splitlines()]
    calls = {r["call_id"]: r for r in ledger if r["kind"] == "call"}
    assert set(calls) == {"r1", "r2", "r3", "w1", "b1"}
    assert calls["b1"]["decision"] == "denied" and calls["w1"]["decision"] == "allowed"
    for kind in ("anthropic_key", "openai_key", "aws_access_key", "github_token", "slack_token", "jwt",
                 "private_key", "url_password", "secret_field", "email", "card"):
        assert f"[MASKED:{kind}:" in calls["r1"]["result"], kind
    assert "[MASKED:anthropic_key:" in calls["w1"]["args"]
    assert "[MASKED:anthropic_key:" in outputs["strata timeline --json"]
