"""No leaks: realistic fake secrets planted in every place a session can carry them (the prompt, model text,
tool arguments and outputs, file names, hook answers and stderr, policy rules, approval and reconcile notes,
config values, the environment, long outputs cut into excerpts, compaction), then every observation surface's
bytes searched for the secret and for distinctive pieces of it (12-character windows of its random part, so a
secret cut in two before masking is found too).

Surfaces: `strata timeline` (table and --json), the evidence ledger, the log file, the verbose log on stderr,
`strata export` (jsonl, html, otlp), `strata sessions`, `strata receipts` (table and --json), `strata doctor`
and error messages. `strata show` and `run --json` print the conversation raw by design and are not checked.

Passing tests document what holds; each real leak is a strict xfail test of the correct behaviour, whose reason
says what leaks where."""

from __future__ import annotations

import json
import random
import string
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests._in_process_cli import json_lines_in_process
from tests.cli._helpers import result_line, strata, text, tool_use
from tests.conftest import StrataCLI, write_script

RNG = random.Random(20261202)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"
EXPORTS = ("export jsonl", "export html", "export otlp")


def _pick(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


@dataclass(frozen=True)
class Secret:
    value: str
    body: str
    """The random part (without a fixed prefix such as `ghp_`): any 12 characters of it must never show."""

    def pieces(self) -> set[str]:
        found = {self.value, self.body[-12:]}
        for line in self.body.splitlines() or [self.body]:
            found |= {line[i:i + 12] for i in range(0, max(1, len(line) - 11), 4)}
        return {p for p in found if len(p) >= 8}


def anthropic() -> Secret:
    body = _pick(ALNUM, 90)
    return Secret("sk-ant-api03-" + body, body)


def github() -> Secret:
    body = _pick(ALNUM, 36)
    return Secret("ghp_" + body, body)


def aws() -> Secret:
    body = _pick(UPPER, 16)
    return Secret("AKIA" + body, body)


def pem() -> Secret:
    body = "\n".join(_pick(B64, 64) for _ in range(6))
    return Secret(f"-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----", body)


def jwt() -> Secret:
    body = f"{_pick(ALNUM, 40)}.{_pick(ALNUM + '-_', 43)}"
    return Secret(f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{body}", body)


def plain(prefix: str = "") -> Secret:
    """A value no pattern recognises: only known (environment or configured) secrets can mask it."""
    body = _pick(ALNUM, 28)
    return Secret(prefix + body, body)


def password() -> Secret:
    body = "Hx" + _pick(ALNUM, 14)
    return Secret(body, body)


Collection = set[str] | tuple[str, ...] | list[str]


def leaks(surfaces: dict[str, str], secret: Secret, only: Collection | None = None) -> dict[str, list[str]]:
    """Surface -> the pieces of `secret` it shows."""
    out = {}
    for name, data in surfaces.items():
        if only is not None and name not in only:
            continue
        hits = sorted(p for p in secret.pieces() if p in data)
        if hits:
            out[name] = hits[:3]
    return out


def _collect(cli: StrataCLI, sid: str, workspace: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """Every observation surface of session `sid`, as text (stdout and stderr together)."""
    commands: dict[str, tuple[str, ...]] = {
        "timeline": ("timeline", sid), "timeline --json": ("timeline", sid, "--json"),
        "sessions": ("sessions",), "sessions --json": ("sessions", "--json"),
        "receipts": ("receipts", sid), "receipts --json": ("receipts", sid, "--json"),
        "doctor": ("doctor", "--workspace", str(workspace)),
        **{f"export {fmt}": ("export", sid, "--format", fmt, "--output", "-") for fmt in ("jsonl", "html", "otlp")},
    }

    def run(args: tuple[str, ...]) -> str:
        proc = strata(cli, *args, env=env)
        assert proc.returncode in (0, 1), (args, proc.stderr)
        return proc.stdout + proc.stderr

    with ThreadPoolExecutor(max_workers=4) as pool:
        outputs = dict(zip(commands, pool.map(run, commands.values()), strict=True))
    assert "[MASKED:" in outputs["timeline --json"]
    ledger = cli.home / "ledger" / f"{sid}.jsonl"
    outputs["ledger"] = ledger.read_text(encoding="utf-8")
    outputs["log file"] = (cli.home / "logs" / "strata.log").read_text(encoding="utf-8")
    return outputs


def _user_config(cli: StrataCLI, body: str) -> None:
    path = cli.home / "xdg-config" / "strata" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")


def _place(total: int, items: list[tuple[int, str]]) -> str:
    """`total` characters of filler with each text written at its offset, between spaces."""
    buf = list(("lorem ipsum dolor sit amet " * (total // 20 + 1))[:total])
    for offset, value in items:
        buf[offset - 1:offset + len(value) + 1] = list(f" {value} ")
    return "".join(buf)


# -- the main session: one run, a secret of its own per placement --------------------------------------------------

@dataclass
class Review:
    cli: StrataCLI
    sid: str
    workspace: Path
    secrets: dict[str, Secret]
    surfaces: dict[str, str]
    env: dict[str, str]
    shown: str = ""
    """`strata show --json`: the raw conversation (proves the secrets did flow)."""
    extra: dict[str, str] = field(default_factory=dict)


S = {
    "prompt": github(), "prompt_cut": github(), "model_text": anthropic(), "model_text_jwt": jwt(),
    "model_text_url": password(),
    "bash_command": anthropic(), "bash_stderr": aws(), "bash_pem": pem(), "env_token": plain(),
    "write_path": github(), "write_content": pem(), "missing_file": aws(), "failing_url": password(),
    "deny_rule": github(), "config_secret": plain("cfg-"), "blob_head": github(), "blob_tail": pem(),
    "blob_middle": anthropic(), "excerpt_2k": aws(),
    "hook_long_reason": github(), "hook_pem_reason": pem(), "hook_stderr": anthropic(),
    "hook_short_reason": aws(), "observe_stderr": anthropic(),
}

PRE_HOOK = """
import json, sys
S = json.loads({secrets!r})
cmd = json.load(sys.stdin)["input"].get("command", "")
if "CASE_LONG" in cmd:  # the secret across the 240th character of the hook row's summary
    reason = "x" * (204 - len("hooks.pre_tool_use[0]: ")) + S["hook_long_reason"] + " is a live token"
    print(json.dumps({{"decision": "block", "reason": reason}}))
elif "CASE_PEM" in cmd:
    print(json.dumps({{"decision": "block", "reason": "the command carries a private key:\\n" + S["hook_pem_reason"]}}))
elif "CASE_SHORT" in cmd:
    print(json.dumps({{"decision": "block", "reason": "refusing: found " + S["hook_short_reason"]}}))
elif "CASE_STDERR" in cmd:  # the hook's stderr is cut to its last 300 characters
    key = S["hook_stderr"]
    sys.stderr.write("scanner crashed on token " + key + "\\n" + "y" * (300 - (len(key) - 6) - 1) + "\\n")
    sys.exit(1)
"""

OBSERVE_HOOK = """
import json, sys
S = json.loads({secrets!r})
sys.stdin.read()
key = S["observe_stderr"]
sys.stderr.write("cannot post the event with key " + key + "\\n" + "y" * (300 - (len(key) - 6) - 1) + "\\n")
sys.exit(1)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> Review:
    root = tmp_path_factory.mktemp("leak")
    home, ws = root / "home", root / "ws"
    home.mkdir()
    ws.mkdir()
    cli = StrataCLI(home, root)
    v = {k: s.value for k, s in S.items()}
    (root / "pre_hook.py").write_text(PRE_HOOK.format(secrets=json.dumps(v)), encoding="utf-8")
    (root / "observe_hook.py").write_text(OBSERVE_HOOK.format(secrets=json.dumps(v)), encoding="utf-8")
    _user_config(cli, f"""
[secrets]
values = ["{v['config_secret']}"]

[[hooks.pre_tool_use]]
matcher = "bash"
command = "python3 {root / 'pre_hook.py'}"

[[hooks.observe]]
command = "python3 {root / 'observe_hook.py'}"
""")
    # Outputs over 16 KiB keep an excerpt in the state log: 6000 characters from the start, 2000 from the end.
    n = 20_000
    (ws / "blob1.txt").write_text(_place(n, [(6000 - 33, v["blob_head"]), (n - 2000 - 40, v["blob_tail"]),
                                             (9000, v["blob_middle"])]), encoding="utf-8")
    # Over 2 KiB: the timeline and the ledger mask a stream prefix; the secret sits across the 2048th character.
    (ws / "long.txt").write_text(_place(4000, [(2048 - 10, v["excerpt_2k"])]), encoding="utf-8")
    # The title is the prompt's first line cut at 80 characters: `prompt_cut` starts at 48, across the cut.
    prompt = f"use {v['prompt']} or {v['prompt_cut']} to push the release"
    script = write_script(root / "script.json", [
        [text(f"I will use {v['model_text']} with a bearer {v['model_text_jwt']} against "
              f"https://deploy:{v['model_text_url']}@db.internal:5432/app"),
         tool_use("b1", "bash", command=(f"echo {v['bash_command']}; echo {v['bash_stderr']} >&2; "
                                         f"echo $MY_SERVICE_TOKEN; echo {v['config_secret']}; "
                                         f"printf '%s\\n' '{v['bash_pem']}'")),
         tool_use("w1", "write_file", path=f"keys/{v['write_path']}.txt", content=v["write_content"]),
         tool_use("r1", "read_file", path=f"missing/{v['missing_file']}.json"),
         tool_use("b2", "bash", command=f"curl -s https://ci:{v['failing_url']}@127.0.0.1:9/x; exit 3"),
         tool_use("b3", "bash", command=f"git push https://x@example.com {v['deny_rule']}")],
        [tool_use("r2", "read_file", path="blob1.txt"), tool_use("r3", "read_file", path="long.txt"),
         tool_use("h1", "bash", command="echo CASE_LONG"), tool_use("h2", "bash", command="echo CASE_PEM"),
         tool_use("h3", "bash", command="echo CASE_SHORT"), tool_use("h4", "bash", command="echo CASE_STDERR")],
        [text("done")],
    ])
    env = {"MY_SERVICE_TOKEN": v["env_token"]}
    run = strata(cli, "--verbose", "run", "--model", f"script:{script}", "--workspace", str(ws),
                 "--allow", "bash", "--allow", "write_file", "--deny", f"bash(*{v['deny_rule']}*)", "--json",
                 prompt, env=env)
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "completed", (run.stdout[-2000:], run.stderr[-2000:])
    sid = summary["session_id"]
    surfaces = _collect(cli, sid, ws, env)
    surfaces["run stderr (--verbose)"] = run.stderr
    shown = strata(cli, "show", sid, "--json").stdout
    no_env = {f"{name} (no env)": strata(cli, "export", sid, "--format", fmt, "--output", "-").stdout
              for name, fmt in (("export jsonl", "jsonl"), ("export html", "html"))}
    return Review(cli, sid, ws, S, surfaces, env, shown, no_env)


KNOWN_LEAKS: dict[str, set[str]] = {}
"""Placement -> the surfaces where it leaks (each covered by an xfail test below); every other surface holds.
Empty: the leaks this review found are fixed, and each has its own test below as well."""


@pytest.mark.parametrize("placement", sorted(S))
def test_placement_stays_masked_elsewhere(review: Review, placement: str) -> None:
    """Every placement is masked on every surface, apart from the leaks documented by the xfail tests."""
    skip = KNOWN_LEAKS.get(placement, set())
    assert leaks(review.surfaces, review.secrets[placement],
                 only=[s for s in review.surfaces if s not in skip]) == {}


def test_the_secrets_flowed_through_the_session(review: Review) -> None:
    """Not vacuous: the raw conversation holds the planted secrets (and every surface was produced)."""
    for name in ("prompt", "model_text", "bash_command", "env_token", "config_secret", "write_path",
                 "write_content", "deny_rule", "hook_long_reason", "hook_short_reason"):
        assert review.secrets[name].value in review.shown.replace("\\n", "\n"), name
    # The excerpt the state log keeps is cut at that token, which is dropped whole rather than cut in two.
    assert review.secrets["blob_head"].value[:12] not in review.shown
    for surface, data in review.surfaces.items():
        assert data.strip(), surface
    assert review.surfaces["ledger"].count("[MASKED:known_secret:") >= 2  # the env token and the config value


def test_exports_mask_the_environment_secret_while_it_is_set(review: Review) -> None:
    """An export made with the run's environment masks the env-named secret's value."""
    assert leaks(review.surfaces, review.secrets["env_token"], only=EXPORTS) == {}


# -- leaks of the main session ------------------------------------------------------------------------------------

def _assert_clean(review: Review, placement: str, surfaces: Collection) -> None:
    assert leaks(review.surfaces, review.secrets[placement], only=surfaces) == {}


def test_sessions_list_masks_the_prompt(review: Review) -> None:
    _assert_clean(review, "prompt", ("sessions", "sessions --json"))


def test_exports_mask_a_secret_cut_by_the_title(review: Review) -> None:
    _assert_clean(review, "prompt_cut", EXPORTS)


def test_receipts_mask_file_names(review: Review) -> None:
    _assert_clean(review, "write_path", ("receipts --json",))


def test_exports_mask_the_environment_secret_without_the_environment(review: Review) -> None:
    assert leaks(review.extra, review.secrets["env_token"]) == {}


@pytest.mark.parametrize("placement", ["blob_head", "blob_tail"])
def test_exports_mask_secrets_cut_by_the_blob_excerpt(review: Review, placement: str) -> None:
    _assert_clean(review, placement, EXPORTS)


def test_hook_row_masks_a_long_reason(review: Review) -> None:
    _assert_clean(review, "hook_long_reason", ("timeline --json", *EXPORTS))


def test_hook_row_masks_a_multiline_private_key(review: Review) -> None:
    _assert_clean(review, "hook_pem_reason", ("timeline --json", *EXPORTS))


def test_failing_hook_stderr_is_masked(review: Review) -> None:
    _assert_clean(review, "hook_stderr", ("timeline --json", "ledger", *EXPORTS))


def test_failing_observe_hook_is_masked_in_the_logs(review: Review) -> None:
    _assert_clean(review, "observe_stderr", ("log file", "run stderr (--verbose)"))


# -- a parked session: an ask rule, an approval decision, a reconcile note, an unknown tool -----------------------

PARK = {"ask_rule": aws(), "deny_reason": github(), "reconcile_note": anthropic(), "tool_name": github()}


@pytest.fixture(scope="module")
def parked(tmp_path_factory: pytest.TempPathFactory) -> Review:
    root = tmp_path_factory.mktemp("park")
    home, ws = root / "home", root / "ws"
    home.mkdir()
    ws.mkdir()
    cli = StrataCLI(home, root)
    v = {k: s.value for k, s in PARK.items()}
    _user_config(cli, f"""
[[policy.rules]]
tool = "bash"
args = {{ command = "*{v['ask_rule']}*" }}
action = "ask"
""")
    script = write_script(root / "script.json", [
        [tool_use("t1", "bash", command="sleep 5", timeout_s=0.3),
         tool_use("p1", "bash", command=f"aws configure set aws_access_key_id {v['ask_rule']}"),
         tool_use("u1", v["tool_name"], path="x")],
        [text("done")],
    ])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(ws), "--allow", "bash",
                 "--on-ask", "park", "--json", "configure aws")
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "awaiting_approval", (run.stdout[-2000:], run.stderr)
    sid = summary["session_id"]
    denied = strata(cli, "deny", sid, "p1", "--reason", f"never paste {v['deny_reason']} into a command")
    assert denied.returncode == 0, denied.stderr
    (unknown,) = [r for r in json_lines_in_process(cli, "receipts", sid, "--json") if r["status"] == "unknown"]
    note = strata(cli, "reconcile", unknown["id"], "--applied", "--note", f"rotated {v['reconcile_note']} after")
    assert note.returncode == 0, note.stderr
    resumed = strata(cli, "resume", sid, "--json")
    assert resumed.returncode == 0, resumed.stderr
    shown = strata(cli, "show", sid, "--json").stdout
    assert all(s.value in shown for s in PARK.values() if s is not PARK["reconcile_note"]), "not planted"
    return Review(cli, sid, ws, PARK, _collect(cli, sid, ws), {}, shown)


PARK_LEAKS: dict[str, set[str]] = {}


@pytest.mark.parametrize("placement", sorted(PARK))
def test_parked_session_placement_stays_masked_elsewhere(parked: Review, placement: str) -> None:
    """Approval and denial reasons, ask rules, reconcile notes: masked apart from the documented leaks."""
    skip = PARK_LEAKS.get(placement, set())
    assert leaks(parked.surfaces, parked.secrets[placement],
                 only=[s for s in parked.surfaces if s not in skip]) == {}


def test_approval_row_masks_the_ask_rule(parked: Review) -> None:
    _assert_clean(parked, "ask_rule", ("timeline --json",))


def test_receipts_mask_the_reconcile_note(parked: Review) -> None:
    _assert_clean(parked, "reconcile_note", ("receipts", "receipts --json"))


def test_timeline_and_ledger_mask_the_proposed_tool_name(parked: Review) -> None:
    _assert_clean(parked, "tool_name", ("timeline --json", "ledger"))


# -- compaction -----------------------------------------------------------------------------------------------------

def test_compaction_summary_is_masked_in_exports(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    token = github()
    (workspace / "pad.txt").write_text("pad " * 3000, encoding="utf-8")
    script = write_script(tmp_path / "script.json", [
        [text("w" * 264 + token.value + " is the token I found, and more words follow here"),
         tool_use("r1", "read_file", path="pad.txt")],
        [tool_use("r2", "read_file", path="pad.txt")],
        [tool_use("r3", "read_file", path="pad.txt")],
        [text("done")],
    ])
    run = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace), "--json", "go",
                 env={"STRATA_CONTEXT_BUDGET_TOKENS": "3000"})
    summary = result_line(run.stdout)
    assert summary is not None and summary["status"] == "completed", run.stderr
    assert '"compacted"' in run.stdout
    sid = summary["session_id"]
    surfaces = {f"export {fmt}": strata(cli, "export", sid, "--format", fmt, "--output", "-").stdout
                for fmt in ("jsonl", "html")}
    assert leaks(surfaces, token) == {}


# -- error messages -------------------------------------------------------------------------------------------------

def test_invalid_rule_error_masks_the_secret(cli: StrataCLI, workspace: Path, tmp_path: Path) -> None:
    token = github()
    script = write_script(tmp_path / "script.json", [[text("done")]])
    proc = strata(cli, "run", "--model", f"script:{script}", "--workspace", str(workspace),
                  "--deny", f"bash curl -H 'Authorization: Bearer {token.value}'", "go")
    assert proc.returncode == 2 and "invalid --deny rule" in proc.stderr
    assert leaks({"stderr": proc.stderr}, token) == {}


def test_config_error_masks_a_secret_value(cli: StrataCLI, workspace: Path) -> None:
    key = anthropic()
    _user_config(cli, f'[secrets]\nenv = ["{key.value}"]\n')
    doctor = strata(cli, "doctor", "--workspace", str(workspace))
    run = strata(cli, "run", "--model", "script:/nonexistent", "--workspace", str(workspace), "go")
    assert doctor.returncode == 1 and run.returncode == 2 and "secrets.env[0]" in run.stderr
    assert leaks({"doctor": doctor.stdout, "run stderr": run.stderr}, key) == {}


def test_secrets_values_are_not_echoed_by_config_errors(cli: StrataCLI, workspace: Path) -> None:
    """What holds: a bad `[secrets] values` entry is reported without its value."""
    key = anthropic()
    _user_config(cli, f'[secrets]\nvalues = ["{key.value}", 7]\n')
    doctor = strata(cli, "doctor", "--workspace", str(workspace))
    assert doctor.returncode == 1 and "secrets.values" in doctor.stdout
    assert leaks({"doctor": doctor.stdout + doctor.stderr}, key) == {}

