"""core/code_cache.py compiles generated source as `exec` would, once per process, and takes compiled code from a
file (an index of source to code, core/indexed_file.py) only for the source it holds the code of."""

from __future__ import annotations

import importlib.util
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import code_cache
from core.indexed_file import IndexedFile, build, text_key
from tests.conftest import REPO


@pytest.fixture(autouse=True)
def _own_cache_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs against a cache state of its own. A module that imported agent.cli.main earlier in this worker
    loaded the checkout's real file (agent/cli/startup_code.py), where a test's source may already be (a test then
    found it compiled: flaky); and a later `startup_code.save()` in the worker wrote every source compiled here into
    that file (the checkout's file held this module's test sources, ~2,000 of them)."""
    monkeypatch.setattr(code_cache, "_codes", {})
    monkeypatch.setattr(code_cache, "_fresh", {})
    monkeypatch.setattr(code_cache, "_used", set())
    monkeypatch.setattr(code_cache, "_file", IndexedFile())


def test_generated_source_runs_as_exec_would_without_this_modules_future_flags() -> None:
    """code_cache.py has `from __future__ import annotations` (as this module has: an `exec` here would make the
    annotation the string '_return_type'); a generated method compiled there must not inherit it: its return
    annotation is the object, as with an `exec` in `dataclasses`, which has no such import."""
    source = "def __create_fn__(_return_type):\n def f(x) -> _return_type:\n  return x + 1\n return f\n"
    ours: dict[str, object] = {}
    code_cache.run(source, {}, ours)
    made = ours["__create_fn__"](int)  # type: ignore[operator]
    assert made(1) == 2
    assert made.__annotations__ == {"return": int}
    assert made.__code__.co_filename == "<string>"


def test_each_distinct_source_is_compiled_once_per_process() -> None:
    source = "answer = 6 * 7  # test_each_distinct_source_is_compiled_once_per_process\n"
    before = code_cache.compiles
    for _ in range(3):
        scope: dict[str, object] = {}
        code_cache.run(source, scope)
        assert scope["answer"] == 42
    assert code_cache.compiles == before + 1


def test_a_file_that_is_not_an_index_of_source_to_code_is_ignored(tmp_path: Path) -> None:
    source = "x = 'test_a_file_that_is_not_an_index_of_source_to_code_is_ignored'\n"
    header = b"strata-code/indexed\n" + importlib.util.MAGIC_NUMBER
    code = compile(source, "<string>", "exec")
    key = text_key(source)
    entry = marshal.dumps((source, code))
    far = marshal.dumps({key: 10**6 << 32 | len(entry)})  # an entry far past the end of the file
    text = marshal.dumps({key: "0"})
    for content in (b"\x00garbage", header + b"\x00garbage", header + (5).to_bytes(4, "little") + b"\x00garb",
                    header + (9).to_bytes(4, "little") + marshal.dumps([key]) + entry,  # an index that is no dict
                    header + len(far).to_bytes(4, "little") + far + entry,
                    header + len(text).to_bytes(4, "little") + text + entry,
                    build(header, {key: b"\x00garbage"}), build(header, {key: entry})[:-3],  # a cut entry
                    build(header, {key: marshal.dumps(code)}),  # code alone: whose source is unknown
                    build(header, {key: marshal.dumps(("y = 'another source'\n", code))}),  # another's, same key
                    build(header, {key: marshal.dumps((source, "not code"))}),
                    build(header, {key: marshal.dumps((source, marshal.dumps(code)))}),
                    b"strata-code\n" + importlib.util.MAGIC_NUMBER + marshal.dumps({source: marshal.dumps(code)}),
                    build(b"", {key: entry}),  # no header
                    b""):
        path = tmp_path / "generated_code.marshal"
        path.write_bytes(content)
        assert code_cache.read(path) == {}
        code_cache.load(path)
        before = code_cache.compiles
        code_cache.run(source, {})
        assert code_cache.compiles in (before, before + 1)  # compiled here at most once, never taken from the file
    assert isinstance(code_cache.compiled(source), type(compile("", "<string>", "exec")))


def test_a_damaged_entry_is_replaced_at_the_next_save_and_the_others_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "generated_code.marshal"
    kept, damaged = (f"v = '{name} test_a_damaged_entry_is_replaced_at_the_next_save'\n" for name in "kd")
    path.write_bytes(build(code_cache._MAGIC, {
        text_key(kept): marshal.dumps((kept, compile(kept, "<string>", "exec"))),
        text_key(damaged): b"\x00garbage"}))
    code_cache.load(path)
    before = code_cache.compiles
    code_cache.run(damaged, {})
    assert code_cache.compiles == before + 1
    code_cache.save(path)
    assert set(code_cache.read(path)) == {kept, damaged}


def test_a_start_unmarshals_the_files_index_and_the_code_it_runs_not_the_whole_file(tmp_path: Path) -> None:
    """A development checkout's file holds every module's sources (tests/conftest.py imports them all: ~2,800,
    1 MB) while a command runs a few hundred: unmarshalling it whole was 3-5 ms of each start."""
    path = tmp_path / "generated_code.marshal"
    sources = [f"value_{n} = {n}  # test_a_start_unmarshals_the_files_index {'x' * 200}\n" for n in range(2000)]
    for source in sources:
        code_cache.compiled(source)
    code_cache.save(path)
    probe = (
        "import marshal, sys\n"
        "from core import code_cache, indexed_file\n"
        "sizes = []\n"
        "class Counting:\n"
        "    dumps = staticmethod(marshal.dumps)\n"
        "    @staticmethod\n"
        "    def loads(data):\n"
        "        value = marshal.loads(data)\n"
        "        sizes.append(len(marshal.dumps(value)))  # what was read: the index, an entry (or all of them)\n"
        "        return value\n"
        "code_cache.marshal = indexed_file.marshal = Counting\n"
        "code_cache.load(__import__('pathlib').Path(sys.argv[1]))\n"
        "scope = {}\n"
        "code_cache.run(sys.argv[2], scope)\n"
        "print(scope['value_1234'], code_cache.compiles, sum(sizes))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(path), sources[1234]], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    value, compiles, unmarshalled = map(int, done.stdout.split())
    assert (value, compiles) == (1234, 0)  # taken from the file
    assert unmarshalled < path.stat().st_size // 10, (unmarshalled, path.stat().st_size)


def test_code_saved_by_one_process_is_taken_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "generated_code.marshal"
    source = "y = 'test_code_saved_by_one_process_is_taken_by_the_next'\n"
    code_cache.compiled(source)
    code_cache.save(path)
    saved = code_cache.read(path)
    assert saved[source].co_filename == "<string>"


def test_code_another_python_saved_is_not_taken(tmp_path: Path) -> None:
    """The file starts with the bytecode version (as a `.pyc` does): code of another Python is never run."""
    path = tmp_path / "generated_code.marshal"
    source = "z = 'test_code_another_python_saved_is_not_taken'\n"
    code_cache.compiled(source)
    code_cache.save(path)
    raw = path.read_bytes()
    assert code_cache.read(path)
    header = raw.index(b"\n") + 1
    path.write_bytes(raw[:header] + b"\x00\x00\r\n" + raw[header + 4:])
    assert code_cache.read(path) == {}


def test_saving_never_writes_through_a_link_planted_where_the_file_is_written_first(tmp_path: Path) -> None:
    """The file is written under a temporary name, then renamed. That name was `NAME.PID.partial`, opened to
    truncate and write, following a link: a link planted there (a pid is easy to guess: strata runs as pid 1 in a
    container) had the save overwrite the file it points to. Python creates its own bytecode files exclusively."""
    path = tmp_path / "generated_code.marshal"
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n", encoding="utf-8")
    path.with_name(f"{path.name}.{os.getpid()}.partial").symlink_to(victim)
    source = "w = 'test_saving_never_writes_through_a_link_planted_where_the_file_is_written_first'\n"
    code_cache.compiled(source)
    code_cache.save(path)
    assert victim.read_text(encoding="utf-8") == "the user's own file\n"
    assert source in code_cache.read(path)
    assert not list(tmp_path.glob("*.partial.*")) and len(list(tmp_path.glob("*.partial"))) == 1  # only the link


def test_a_forward_references_expression_is_compiled_once_and_evaluates_as_typings_own_compile() -> None:
    """`compile_expression` stands in for the `compile` of `typing.ForwardRef` (agent/cli/startup_code.py): the
    same code as `compile(text, '<string>', 'eval')`, made once per process for every reference of that text."""
    text = "dict[str, 'list[int]']  # test_a_forward_references_expression_is_compiled_once"
    before = code_cache.compiles
    made = [code_cache.compile_expression(text, "<string>", "eval") for _ in range(3)]
    assert code_cache.compiles == before + 1
    assert made[0] is made[1] is made[2]
    assert made[0] == compile(text, "<string>", "eval", dont_inherit=True)  # typing inherits no future flag
    assert eval(made[0], {}) == dict[str, "list[int]"]  # type: ignore[misc]
    assert made[0].co_filename == "<string>"


def test_an_expression_and_a_statement_of_the_same_text_are_kept_apart() -> None:
    text = "marker_test_an_expression_and_a_statement_of_the_same_text_are_kept_apart"
    expression = code_cache.compile_expression(text, "<string>", "eval")
    statement = code_cache.compiled(text)
    assert expression is not statement
    assert eval(expression, {text: 1}) == 1
    scope: dict[str, object] = {text: 1}
    assert eval(statement, scope) is None  # an `exec` code object: the statement's value is not returned


def test_compile_expression_passes_any_other_compile_through_unchanged() -> None:
    """Only typing's exact call is cached; anything else is `compile`'s own, without this module's
    `from __future__ import annotations` (a caller that inherits nothing gets nothing)."""
    before = code_cache.compiles
    as_exec = code_cache.compile_expression("def f(x: int) -> int: return x\n", "<string>", "exec")
    scope: dict[str, object] = {}
    exec(as_exec, scope)
    assert scope["f"].__annotations__ == {"x": int, "return": int}  # type: ignore[attr-defined]
    assert code_cache.compile_expression("1 + 1", "elsewhere.py", "eval").co_filename == "elsewhere.py"
    assert eval(code_cache.compile_expression(b"2 + 2", "<string>", "eval")) == 4
    assert eval(code_cache.compile_expression("3 + 3", "<string>", "eval", 0, True)) == 6
    assert code_cache.compiles == before
    for bad in ("list[", "\x00x"):
        try:
            compile(bad, "<string>", "eval")
        except (SyntaxError, ValueError) as expected:
            kind = type(expected)
        try:
            code_cache.compile_expression(bad, "<string>", "eval")
        except (SyntaxError, ValueError) as got:
            assert type(got) is kind
        else:
            raise AssertionError(f"{bad!r} compiled")


def test_a_null_prefixed_text_run_as_a_statement_is_refused_as_exec_refuses_it() -> None:
    """An expression's key starts with a null character; a statement of that text is never its code."""
    text = "marker_null_prefixed"
    code_cache.compile_expression(text, "<string>", "eval")
    try:
        code_cache.run("\x00eval\x00" + text, {})
    except (SyntaxError, ValueError):  # as `compile` refuses it (SyntaxError from 3.11.?, ValueError before)
        pass
    else:
        raise AssertionError("a source with a null character ran")


def test_expressions_saved_by_one_process_are_taken_by_the_next(tmp_path: Path) -> None:
    path = tmp_path / "generated_code.marshal"
    text = "tuple[int, 'test_expressions_saved_by_one_process_are_taken_by_the_next']"
    code_cache.compile_expression(text, "<string>", "eval")
    code_cache.save(path)
    saved = code_cache.read(path)
    (key,) = [key for key in saved if key.endswith(text)]
    assert key.startswith("\x00") and saved[key] == compile(text, "<string>", "eval", dont_inherit=True)


def test_evaluate_makes_a_named_tuple_as_collections_own_eval_does_compiling_its_text_once() -> None:
    """`evaluate` stands in for the `eval` with which `collections.namedtuple` makes each `__new__`
    (agent/cli/startup_code.py): the same function, its text compiled once per process."""
    import collections

    text = "lambda _cls, alpha_evaluate_test, beta: _tuple_new(_cls, (alpha_evaluate_test, beta))"
    before = code_cache.compiles
    made = [code_cache.evaluate(text, {"_tuple_new": tuple.__new__, "__name__": "namedtuple_X"}) for _ in range(3)]
    assert code_cache.compiles == before + 1
    assert made[0].__code__ is made[1].__code__ is made[2].__code__
    point = collections.namedtuple("point", ["alpha_evaluate_test", "beta"])
    assert made[0](point, 1, 2) == point(1, 2) == (1, 2)
    assert made[0].__code__.co_filename == "<string>"


def test_evaluate_without_a_namespace_is_evals_own_in_the_callers_namespace() -> None:
    local_only = 41  # noqa: F841  # read by the evaluated text, through the caller's frame
    assert code_cache.evaluate("local_only + 1") == 42
    assert code_cache.evaluate("local_only + 2", None, {"local_only": 1}) == 3
    assert code_cache.evaluate(compile("6 * 7", "<string>", "eval"), {}) == 42
