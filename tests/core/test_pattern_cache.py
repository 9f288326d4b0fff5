"""core/pattern_cache.py compiles a regular expression as `re` does, and takes its opcodes from a file only when
the engine accepts them; anything else in the file is ignored and compiled anew. Each check runs in a child
process: installing the cache changes `re` for the whole process."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

from core import pattern_cache
from core.indexed_file import build
from tests.conftest import REPO

_PATTERNS = [
    (r"(?P<key>[a-z_]+)\s*=\s*(?P<value>\"[^\"]*\"|\S+)", 0),
    (r"^[A-Za-z_][A-Za-z0-9_]*$", 0),
    (r"token|secret|pass(?:w(?:or)?d)?", 2),  # re.IGNORECASE
    (r"(?x) \d+ (?: \. \d+ )?  # verbose, with a comment", 0),
    (r"(?<![a-z])api[_-]?key(?=\W)", 0),
    (r"(a)(b)?(?(2)c|d)", 0),
    (r"[\u061c\u200e\u202a-\u202e]", 0),
    (r"^\s*$", 8),  # re.MULTILINE
]


def _child(path: Path, body: str) -> dict[str, object]:
    """Run `body` in a new Python with the cache installed and loaded from `path`; what it printed (JSON)."""
    probe = (
        "import json, re, sys\n"
        "from pathlib import Path\n"
        "from core import pattern_cache\n"
        "assert pattern_cache.install()\n"
        f"path = Path({str(path)!r})\n"
        "pattern_cache.load(path)\n"
        f"patterns = {_PATTERNS!r}\n"
        + body
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


_COMPARE = (
    "import re._compiler, re._parser\n"
    "def plain(p, f):\n"
    "    return pattern_cache._original(p, f)\n"
    "same = all(pattern_cache.compile_pattern(p, f) == plain(p, f) for p, f in patterns)\n"
    "found = [bool(re.compile(p, f).search('key = \"v\" api_key= 1.5 ac TOKEN \\u200e')) for p, f in patterns]\n"
    "pattern_cache.save(path)\n"
    "print(json.dumps({'same': same, 'found': found, 'compiles': pattern_cache.compiles}))\n"
)


def test_patterns_are_compiled_as_re_compiles_them_and_taken_from_the_file_the_next_time(tmp_path: Path) -> None:
    path = tmp_path / "compiled_patterns.marshal"
    first = _child(path, _COMPARE)
    assert first["same"] is True  # equal patterns: the same text, flags and engine code as re's own
    assert first["compiles"] == len(_PATTERNS) * 2  # each compiled by the cache (re keeps the second in its own)
    saved = pattern_cache.read(path)
    assert {(p, f) for p, f in _PATTERNS} <= set(saved)
    second = _child(path, _COMPARE)
    assert second == {**first, "compiles": 0}  # every pattern found in the file, and it matches as before


def test_opcodes_the_engine_refuses_or_a_damaged_file_are_ignored_and_replaced(tmp_path: Path) -> None:
    path = tmp_path / "compiled_patterns.marshal"
    _child(path, _COMPARE)
    magic = pattern_cache._MAGIC
    assert path.read_bytes().startswith(magic)
    entries = pattern_cache.read(path)
    for key, raw in list(entries.items()):
        flags, code, groups, groupindex, indexgroup = marshal.loads(raw)
        entries[key] = marshal.dumps((flags, [255, 255, *code], groups, groupindex, indexgroup))  # not SRE code
    path.write_bytes(build(magic, pattern_cache.entries(entries)))
    again = _child(path, _COMPARE)
    assert again["same"] is True and again["compiles"] == len(_PATTERNS) * 2
    fixed = pattern_cache.read(path)  # the refused entries were replaced by the code compiled anew
    assert all(marshal.loads(fixed[(p, f)])[1][:2] != [255, 255] for p, f in _PATTERNS)

    (pattern, flags) = _PATTERNS[0]
    key = pattern_cache._file_key(pattern, flags)
    opcodes = fixed[(pattern, flags)]
    for content in (b"", b"\x00garbage", magic + b"\x00garbage", magic + b"\x03\x00\x00\x00[\x01\x00",
                    build(magic, {key: b"\x00garbage"}), build(magic, {key: marshal.dumps(("x", 0))}),
                    build(magic, {key: marshal.dumps((pattern, flags, "not bytes"))}),
                    build(magic, {key: marshal.dumps((pattern, flags + 1, opcodes))}),  # another flag's: same key
                    build(magic, {key: marshal.dumps((pattern.encode(), flags, opcodes))}),  # bytes, not text
                    build(magic, {key: marshal.dumps((pattern, flags, opcodes))})[:-2],  # cut short
                    build(b"", {key: marshal.dumps((pattern, flags, opcodes))}),  # no header
                    b"strata-re\n" + magic[len(b"strata-re/indexed\n"):] + marshal.dumps({(pattern, flags): opcodes}),
                    marshal.dumps({})):
        path.write_bytes(content)
        assert pattern_cache.read(path) == {}
        assert _child(path, _COMPARE)["same"] is True


def test_patterns_compiled_after_recording_stops_are_not_kept(tmp_path: Path) -> None:
    """What a command compiles once its modules are imported may be made of what it read (agent/cli/startup_code.py
    stops the recording there): it is never written to the file."""
    path = tmp_path / "compiled_patterns.marshal"
    body = (
        "re.compile('module-level-pattern-[0-9]+')\n"
        "pattern_cache.stop_recording()\n"
        "re.compile(re.escape('tok-SECRET-never-in-the-file'))\n"
        "pattern_cache.save(path)\n"
        "print(json.dumps({}))\n"
    )
    _child(path, body)
    kept = pattern_cache.read(path)
    assert ("module-level-pattern-[0-9]+", 0) in kept
    assert b"SECRET" not in path.read_bytes()


def test_a_parsed_pattern_and_a_debug_pattern_go_to_re_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / "compiled_patterns.marshal"
    body = (
        "scanner = re.Scanner([(r'[0-9]+', lambda s, t: int(t)), (r'\\s+', None)])\n"  # compiles a parsed pattern
        "print(json.dumps({'scanned': scanner.scan('1 22 333')[0], 'compiles': pattern_cache.compiles}))\n"
    )
    assert _child(path, body) == {"scanned": [1, 22, 333], "compiles": 0}


def test_an_engine_that_takes_the_opcodes_otherwise_leaves_re_alone() -> None:
    """Another Python's `_sre.compile` (here one that refuses the call as this module makes it): the probe at
    install fails, nothing is installed, and `re` compiles as before."""
    probe = (
        "import json, re, re._compiler\n"
        "from core import pattern_cache\n"
        "engine = pattern_cache._sre\n"
        "class Other:\n"
        "    MAGIC = engine.MAGIC\n"
        "    @staticmethod\n"
        "    def compile(*args):\n"
        "        raise TypeError('compile() takes 7 arguments')\n"
        "pattern_cache._sre = Other\n"
        "installed = pattern_cache.install()\n"
        "print(json.dumps({'installed': installed, 'compiler': re._compiler.compile.__module__,\n"
        "                  'works': re.compile('a(b)c').match('abc').group(1)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"installed": False, "compiler": "re._compiler", "works": "b"}


def test_a_start_that_finds_patterns_this_python_saved_runs_no_probe(tmp_path: Path) -> None:
    """The probe `install` compiles with `re`'s own parser (~1 ms of every start) proves what the file's header already
    says when it names this interpreter and its `re`: the start that saved the file ran the probe on the same `re`."""
    probe = (
        "import re, re._parser, sys\n"
        "parsed = []\n"
        "plain = re._parser.parse\n"
        "re._parser.parse = lambda p, *a, **k: (parsed.append(p), plain(p, *a, **k))[1]\n"
        "from agent.cli.startup_code import startup_code\n"
        "parsed.clear()  # what importing it compiled\n"
        "startup_code.install()\n"
        "print(len(parsed))\n"
        "re.compile('test_a_start_that_finds_patterns[0-9]+')\n"
        "startup_code.save()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "pycache")
    runs = [subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=60) for _ in range(2)]
    assert [run.returncode for run in runs] == [0, 0], [run.stderr for run in runs]
    assert [run.stdout.strip() for run in runs] == ["2", "0"]  # the probe's two parses, at the first start only
    (saved,) = (tmp_path / "pycache").rglob("compiled_patterns.*.marshal")
    assert ("test_a_start_that_finds_patterns[0-9]+", 0) in pattern_cache.read(saved)


def test_patterns_saved_under_another_fingerprint_are_not_taken_and_the_probe_runs(tmp_path: Path) -> None:
    path = tmp_path / "compiled_patterns.marshal"
    _child(path, _COMPARE)
    raw = path.read_bytes()
    version = sys.version.encode("utf-8", "backslashreplace")
    assert version in raw[:len(pattern_cache._MAGIC)]
    path.write_bytes(raw.replace(version, b"3.99.0 (another build)", 1))
    assert pattern_cache.read(path) == {}
    probe = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "import re._parser\n"
        "parsed = []\n"
        "plain = re._parser.parse\n"
        "re._parser.parse = lambda p, *a, **k: (parsed.append(p), plain(p, *a, **k))[1]\n"
        "from core import pattern_cache\n"
        f"assert pattern_cache.install(Path({str(path)!r}))\n"
        "import re\n"
        "re.compile(r'(?P<key>[a-z_]+)\\s*=\\s*(?P<value>\\\"[^\\\"]*\\\"|\\S+)')\n"
        "print(json.dumps({'parsed': len(parsed), 'compiles': pattern_cache.compiles}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"parsed": 3, "compiles": 1}  # the probe's two, and the pattern's anew
