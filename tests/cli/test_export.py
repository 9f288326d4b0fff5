"""`strata export ID --format jsonl|html|otlp` with real processes, on a session that read a file full of planted
secrets and wrote one of them out: no export holds a secret raw; the JSONL round-trips; the OTLP trace validates;
the HTML opens in headless Chromium, its script draws a bar for every call, and its screenshot is a picture.

Chromium is a system program (tests/_system.py): where it is missing the browser test skips with the reason; CI
installs it and sets STRATA_REQUIRE_BROWSER=1 (.ci/run), so there its absence fails the test."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import sqlite3
import stat
import string
import subprocess
from contextlib import closing
from dataclasses import dataclass
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests._in_process_cli import json_lines_in_process
from tests._otlp_check import validate_otlp
from tests._png import read_png
from tests._system import CHROMIUM
from tests.cli._helpers import ALLOW_EFFECTS, error_lines, events_of, json_lines, strata, text, tool_use
from tests.conftest import REPO, StrataCLI, write_script

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")
COLOURS = {"allowed": (0x22, 0xA0, 0x6B), "denied": (0xE5, 0x48, 0x4D), "unknown": (0x8B, 0x5C, 0xF6),
           "model": (0x3B, 0x82, 0xF6)}
"""The waterfall's fills (observability/export/_html_assets.py) for the calls this session makes."""


def _random(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True)
class Planted:
    anthropic: str
    aws: str
    github: str
    jwt: str
    pem_lines: tuple[str, ...]
    url_password: str
    email: str

    @classmethod
    def fresh(cls) -> Planted:
        jwt = ".".join([_b64url(b'{"alg":"HS256","typ":"JWT"}'),
                        _b64url(json.dumps({"sub": _random(12), "admin": True}).encode()),
                        _b64url(secrets.token_bytes(32))])
        pem = tuple(base64.b64encode(secrets.token_bytes(48)).decode() for _ in range(8))
        return cls(anthropic="sk-ant-api03-" + _random(80, string.ascii_letters + string.digits + "_-"),
                   aws="AKIA" + _random(16, string.ascii_uppercase + string.digits), github="ghp_" + _random(36),
                   jwt=jwt, pem_lines=pem, url_password=_random(20), email=f"{_random(10).lower()}@example.org")

    @property
    def pem(self) -> str:
        return "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(self.pem_lines) + "\n-----END RSA PRIVATE KEY-----"

    def file(self) -> str:
        return (f"ANTHROPIC_API_KEY={self.anthropic}\naws_access_key_id = {self.aws}\n"
                f"github: {self.github}\nsession cookie {self.jwt}\n{self.pem}\n"
                f"DATABASE_URL=postgres://app:{self.url_password}@db.internal:5432/app\nowner {self.email}\n")

    def values(self) -> list[str]:
        return [self.anthropic, self.aws, self.github, self.jwt, *self.pem_lines, self.url_password, self.email]


@dataclass
class Exported:
    cli: StrataCLI
    session_id: str
    planted: Planted
    calls: list[str]
    run_events: list[dict[str, Any]]
    jsonl: str
    otlp: str
    html_path: Path


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    base = tmp_path_factory.mktemp("export")
    cli = StrataCLI(base / "home", base)
    ws = base / "ws"
    ws.mkdir()
    planted = Planted.fresh()
    (ws / "secrets.txt").write_text(planted.file())
    turns = [
        [text("Let me look at the secrets file."), tool_use("read", "read_file", path="secrets.txt"),
         tool_use("missing", "bash", command="cat no-such-file"), tool_use("rm", "bash", command="rm -rf build")],
        [text("Saving the AWS key."),
         tool_use("save", "write_file", path="creds.env", content=f"AWS_ACCESS_KEY_ID={planted.aws}\n"),
         tool_use("slow", "bash", command="sleep 5", timeout_s=0.3)],
        [text(f"Done; the GitHub token was {planted.github} and the owner is {planted.email}.")],
    ]
    script = write_script(base / "script.json", turns)
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), *ALLOW_EFFECTS,
                 "--deny", "bash(rm*)", "--json", f"audit the secrets for {planted.email}")
    assert run.returncode == 5, run.stderr  # the timed-out effect is unknown
    run_events = events_of(run.stdout)
    session_id = run_events[0]["session_id"]
    assert (ws / "creds.env").read_text() == f"AWS_ACCESS_KEY_ID={planted.aws}\n"
    jsonl = strata(cli, "export", session_id, "--format", "jsonl")
    otlp = strata(cli, "export", session_id, "--format", "otlp")
    html = strata(cli, "export", session_id, "--format", "html", "--output", str(base / "session.html"))
    for proc in (jsonl, otlp, html):
        assert proc.returncode == 0, proc.stderr
    assert html.stdout.strip() == str(base / "session.html")
    return Exported(cli, session_id, planted, ["read", "missing", "rm", "save", "slow"], run_events, jsonl.stdout,
                    otlp.stdout, base / "session.html")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_exports_never_contain_planted_secrets(exported: Exported) -> None:
    """The store holds the secrets raw (the model wrote one, the tool read them all); no export does, in its
    text or in any decoded form of it."""
    with closing(sqlite3.connect(exported.cli.home / "strata.db")) as conn:
        payloads = "".join(p for (p,) in conn.execute("SELECT payload FROM events"))
    assert exported.planted.aws in payloads and exported.planted.anthropic in payloads
    html = exported.html_path.read_text()
    forms = {
        "jsonl": [exported.jsonl, *(s for line in json_lines(exported.jsonl) for s in _strings(line))],
        "otlp": [exported.otlp, *_strings(json.loads(exported.otlp))],
        "html": [html, unescape(html)],
    }
    for name, texts in forms.items():
        leaked = {secret[:16] for secret in exported.planted.values() for t in texts if secret in t}
        assert leaked == set(), f"{name} export holds {leaked}"
        assert "[MASKED:" in texts[0], name
    for kind in ("anthropic_key", "aws_access_key", "github_token", "jwt", "private_key", "url_password", "email"):
        assert f"[MASKED:{kind}:" in exported.jsonl, kind


def test_jsonl_round_trips(exported: Exported) -> None:
    """Every line parses; a session header, then the state log in seq order exactly as the run committed it
    (masked), then the timeline exactly as `strata timeline --json` gives it, then the receipts."""
    objs = json_lines(exported.jsonl)
    assert len(objs) == len(exported.jsonl.splitlines())
    assert objs[0]["type"] == "session" and objs[0]["session"]["id"] == exported.session_id
    events = [o for o in objs if o["type"] == "event"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [(e["seq"], e["kind"]) for e in events] == [(e["seq"], e["kind"]) for e in exported.run_events]
    rows = [o for o in objs if o["type"] == "timeline"]
    timeline = json_lines_in_process(exported.cli, "timeline", exported.session_id, "--json")
    assert [{k: v for k, v in r.items() if k != "type"} for r in rows] == timeline
    receipts = [o for o in objs if o["type"] == "receipt"]
    assert {r["call_id"]: r["status"] for r in receipts} == {"missing": "failed", "save": "done", "slow": "unknown"}
    assert [o["type"] for o in objs] == ["session"] + ["event"] * len(events) + ["timeline"] * len(rows) + [
        "receipt"] * len(receipts)
    counts = objs[0]["session"]["counts"]
    assert (counts["turns"], counts["tool_calls"], counts["denials"], counts["unknown_receipts"]) == (3, 5, 1, 1)


def test_otlp_trace_validates(exported: Exported) -> None:
    """The OTLP/JSON document validates; each call and model attempt is a span under its turn."""
    spans = validate_otlp(json.loads(exported.otlp))
    tools = {s["_attrs"]["gen_ai.tool.call.id"]: s for s in spans if s["name"].startswith("execute_tool ")}
    assert sorted(tools) == sorted(exported.calls)
    assert {k: s["_attrs"]["strata.decision"] for k, s in tools.items()} == {
        "read": "allowed", "missing": "allowed", "rm": "denied", "save": "allowed", "slow": "allowed"}
    assert tools["slow"]["_attrs"]["strata.outcome"] == "unknown"
    assert [s["name"] for s in spans if s["name"].startswith("turn ")] == ["turn 1", "turn 2", "turn 3"]
    assert len([s for s in spans if s["_attrs"].get("gen_ai.operation.name") == "chat"]) == 3


@pytest.fixture(scope="module")  # module scope, named first: it runs before the `exported` session is made
def chromium() -> str:
    """Chromium's path; the test skips (or fails, under STRATA_REQUIRE_BROWSER=1) before any work without it."""
    return CHROMIUM.require()


def _chromium(chromium: str, *args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=90)


class Bars(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, str] = {}
        self.drawn: str | None = None
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "call-bar" in classes:
            self.calls[a["data-call-id"] or ""] = a.get("data-decision") or ""
        if a.get("id") == "waterfall":
            self.drawn = a.get("data-drawn")
        self.external += [v or "" for k, v in attrs if k in ("src", "href") and not (v or "").startswith("#")]


def test_html_opens_in_headless_chromium(chromium: str, exported: Exported, tmp_path: Path) -> None:
    """In a real browser the page's script draws a bar per call with its decision, and the screenshot is a
    picture: full size, many colours, the decision and model colours among them."""
    url = exported.html_path.as_uri()
    dom = _chromium(chromium, "--dump-dom", url, profile=tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    bars = Bars()
    bars.feed(dom.stdout)
    assert bars.calls == {"read": "allowed", "missing": "allowed", "rm": "denied", "save": "allowed",
                          "slow": "unknown"}
    assert bars.drawn is not None and int(bars.drawn) >= len(exported.calls) + 3
    assert bars.external == []

    shot = tmp_path / "shot.png"
    proc = _chromium(chromium, f"--screenshot={shot}", "--window-size=1400,1000", url,
                     profile=tmp_path / "profile-shot")
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    assert shot.stat().st_size > 30_000
    image = read_png(shot.read_bytes())
    assert (image.width, image.height) == (1400, 1000)
    colours = image.colours(step=1)
    assert len(colours) > 200, len(colours)
    assert colours.most_common(1)[0][1] < 0.8 * sum(colours.values())  # not a blank page
    missing = {name: rgb for name, rgb in COLOURS.items() if colours[rgb] < 20}
    assert missing == {}, f"the screenshot lacks {missing}"
    if os.environ.get("STRATA_SCREENSHOTS") == "1":  # the README's picture of the export
        shutil.copyfile(shot, REPO / "docs" / "export.png")


def test_html_axis_labels_never_overlap(chromium: str, cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    """The page hides an axis label that would overlap another (its grid line stays): a narrow window keeps
    fewer labels than a wide one, and hides the rest."""
    import re

    script = write_script(tmp_path / "s.json", [[text("Waiting."), tool_use("w", "bash", command="sleep 1.2")],
                                                [text("done")]])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--allow", "bash", "go")
    assert run.returncode == 0, run.stderr
    page = tmp_path / "page.html"
    assert strata(cli, "export", "last", "--format", "html", "--output", str(page)).returncode == 0
    shown = {}
    for width in (1400, 420):
        dom = _chromium(chromium, f"--window-size={width},900", "--dump-dom", page.as_uri(),
                        profile=tmp_path / f"p{width}")
        assert dom.returncode == 0, dom.stderr[-2000:]
        (track,) = re.findall(r'<div class="wf-axis-track" data-labels-shown="(\d+)">(.*?)</div>', dom.stdout)
        shown[width] = (int(track[0]), track[1].count('data-hidden="overlap"'))
    assert shown[1400][0] >= 4 and shown[420][0] >= 2, shown
    assert shown[420][0] < shown[1400][0] and shown[420][1] >= 1, shown


def test_html_default_output_is_in_the_current_directory(exported: Exported, tmp_path: Path) -> None:
    """Without --output the page goes to ./strata-ID.html, and its path is printed."""
    cli = StrataCLI(exported.cli.home, tmp_path)
    proc = strata(cli, "export", exported.session_id, "--format", "html")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / f"strata-{exported.session_id}.html"
    assert proc.stdout == f"{path}\n"
    assert path.read_text() == exported.html_path.read_text()
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_output_file_and_stdout_agree(exported: Exported, tmp_path: Path) -> None:
    """`--output FILE` writes what stdout would carry and prints the path; `--output -` is stdout; jsonl is the
    default format."""
    out = tmp_path / "session.otlp.json"
    proc = strata(exported.cli, "export", exported.session_id, "--format", "otlp", "--output", str(out))
    assert proc.returncode == 0 and proc.stdout == f"{out}\n", proc.stderr
    assert out.read_text() == exported.otlp
    assert strata(exported.cli, "export", exported.session_id).stdout == exported.jsonl
    dash = strata(exported.cli, "export", exported.session_id, "--format", "html", "--output", "-")
    assert dash.stdout == exported.html_path.read_text()


def test_output_over_an_existing_file_keeps_its_permissions(exported: Exported, tmp_path: Path) -> None:
    """`--output FILE` over a file the user made (0644, say, for a web server to read) replaces its content and
    keeps its permission bits; a new file is made 0600. Before, every replaced file became 0600."""
    shared, fresh = tmp_path / "shared.html", tmp_path / "fresh.html"
    shared.write_text("old\n")
    shared.chmod(0o644)
    for path in (shared, fresh):
        proc = strata(exported.cli, "export", exported.session_id, "--format", "html", "--output", str(path))
        assert proc.returncode == 0, proc.stderr
        assert path.read_text() == exported.html_path.read_text()
    assert (stat.S_IMODE(shared.stat().st_mode), stat.S_IMODE(fresh.stat().st_mode)) == (0o644, 0o600)


def test_export_errors_are_one_line(exported: Exported, tmp_path: Path) -> None:
    """An unknown session and an unwritable output exit 1 with one error line; a bad format exits 2."""
    missing = strata(exported.cli, "export", "no-such-session")
    assert missing.returncode == 1 and missing.stdout == ""
    (line,) = error_lines(missing.stderr)
    assert "no-such-session" in line
    target = tmp_path / "no-such-dir" / "x.html"
    unwritable = strata(exported.cli, "export", exported.session_id, "--format", "html", "--output", str(target))
    assert unwritable.returncode == 1, unwritable.stderr
    (line,) = error_lines(unwritable.stderr)
    assert str(target) in line
    bad = strata(exported.cli, "export", exported.session_id, "--format", "pdf")
    assert bad.returncode == 2 and "pdf" in bad.stderr


def test_ci_installs_chromium() -> None:
    """CI runs the browser test rather than skipping it: .ci/run installs Chromium when it is missing."""
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert "apt-get install -y -qq chromium" in ci and "command -v chromium" in ci
