"""The command reader case by case: what it is certain of, what it sees through, where it says it cannot see,
and that no input (however deep or long) makes it fail instead of answering."""

from __future__ import annotations

import pytest

from tool_executor.shell import MAX_DEPTH, read_command
from tool_executor.shell._reader import MAX_COMMANDS


def words(text: str) -> tuple[str, ...] | None:
    single = read_command(text).reading.single
    return None if single is None else single.words


def seen(text: str) -> list[str]:
    return [" ".join(c.words) for c in read_command(text).reading.commands]


@pytest.mark.parametrize(("text", "expected"), [
    ("ls -la", ("ls", "-la")),
    ("  git   status  ", ("git", "status")),
    ("grep 'a b' \"c d\" e\\ f", ("grep", "a b", "c d", "e f")),
    ("echo $'x\\ny' $'\\x41\\101\\u00e9'", ("echo", "x\ny", "AAé")),
    ("printf '%s' \"it's\"", ("printf", "%s", "it's")),
    ("ls # a comment; rm -rf x", ("ls",)),
    ("ls a#b", ("ls", "a#b")),
    ("echo $ x", ("echo", "$", "x")),
    ("/usr/bin/ls", ("/usr/bin/ls",)),
])
def test_plain_commands_are_read_with_certainty(text: str, expected: tuple[str, ...]) -> None:
    """One simple command with quoting, ANSI-C strings and comments is read as bash reads it."""
    assert words(text) == expected


@pytest.mark.parametrize(("text", "why"), [
    ("ls=1 rm -f x", "assignment"),
    ("lsX=1 touch x", "assignment"),
    ("ls; rm x", "more than one simple command"),
    ("ls\nrm x", "more than one simple command"),
    ("(ls)", "more than one simple command"),
    ("ls > out", "redirection"),
    ("ls 2>&1", "redirection"),
    ("cat <<EOF\nx\nEOF", "here-document"),
    ("ls $HOME", "expanded"),
    ("ls ${x@P}", "expanded"),
    ("ls $(rm x)", "expanded"),
    ("ls `rm x`", "expanded"),
    ("ls $((1+2))", "expanded"),
    ("ls *.py", "glob"),
    ("ls a[bc]", "glob"),
    ("ls {a,b}", "brace"),
    ("ls ~/x", "tilde"),
    ("ls $\"x\"", "locale"),
    ("ls <(rm x)", "process substitution"),
    ("\\ls", "quotes or escapes"),
    ("'ls' -la", "quotes or escapes"),
    ("l\\\ns", "line continuation"),
    ("ls 'unclosed", "unclosed"),
    ("if true; then ls; fi", "keyword"),
    ("! ls", "keyword"),
    ("for x in a; do ls; done", "more than one"),
    ("env ls", "runs another command"),
    ("/usr/bin/env ls", "runs another command"),
    ("exec ls", "runs another command"),
    ("time ls", "runs another command"),
    ("timeout 5 ls", "runs another command"),
    ("bash -c ls", "runs another command"),
    ("eval ls", "runs another command"),
    ("xargs ls", "runs another command"),
    ("mapfile -C 'rm x' -c 1 lines", "runs another command"),
    ("enable -f ./x.so x", "runs another command"),
    ("find . -exec ls ;", "`find -exec` runs another command"),
    ("((x = 1))", "arithmetic"),
])
def test_what_an_allow_pattern_cannot_vouch_for_says_why(text: str, why: str) -> None:
    """Anything but one plain simple command is uncertain, and the reason names what was in the way."""
    reading = read_command(text).reading
    assert reading.single is None and read_command(text).allow_text is None
    assert any(why in u for u in reading.uncertain), reading.uncertain


def test_find_without_an_action_is_a_plain_command() -> None:
    """`find` runs another command only with -exec/-execdir/-ok/-okdir."""
    assert words("find . -name x -print") == ("find", ".", "-name", "x", "-print")


@pytest.mark.parametrize(("text", "command"), [
    ("/bin/rm -f x", "/bin/rm -f x"),
    ("'r'm x", "rm x"),
    ('"r"m x', "rm x"),
    ("r\\m x", "rm x"),
    ("r\\\nm x", "rm x"),
    ("A=1 B=2 rm x", "rm x"),
    ("env -i -u HOME FOO=1 -- rm x", "rm x"),
    ("env -uHOME --chdir=/ rm x", "rm x"),
    ("command -p rm x", "rm x"),
    ("builtin rm x", "rm x"),
    ("exec -a name rm x", "rm x"),
    ("nice -n 5 rm x", "rm x"),
    ("nice -5 rm x", "rm x"),
    ("nohup rm x", "rm x"),
    ("setsid -f rm x", "rm x"),
    ("stdbuf -oL -e 0 rm x", "rm x"),
    ("timeout -k 1 --signal=KILL 5 rm x", "rm x"),
    ("sudo -u root -E VAR=1 rm x", "rm x"),
    ("doas -u root rm x", "rm x"),
    ("ionice -c 3 rm x", "rm x"),
    ("chroot / rm x", "rm x"),
    ("xargs -0 -n 1 -I{} rm {}", "rm {}"),
    ("xargs -i{} rm {}", "rm {}"),
    ("xargs", "echo"),
    ("time -p rm x", "rm x"),
    ("busybox rm x", "rm x"),
    ("taskset -c 0 rm x", "rm x"),
    ("chrt -f 10 rm x", "rm x"),
    ("flock -w 5 lockfile rm x", "rm x"),
    ("flock lockfile -c 'rm x'", "rm x"),
    ("unshare -r --propagation private rm x", "rm x"),
    ("strace -f -o log rm x", "rm x"),
    ("watch -n 1 rm x", "rm x"),
    ("su -c 'rm x' root", "rm x"),
    ("su - root -c 'rm x'", "rm x"),
    ("runuser -u nobody -- rm x", "rm x"),
    ("find . -name x -exec rm {} ;", "rm {}"),
    ("find . -execdir rm {} + -ok rm -i {} \\;", "rm -i {}"),
    ("sudo env nice -n 1 timeout 5 rm x", "rm x"),
    ("bash -c 'rm x'", "rm x"),
    ("sh -ec \"ls; rm x\"", "rm x"),
    ("bash -o pipefail -c 'rm x'", "rm x"),
    ("bash --norc -xc 'rm x' name arg", "rm x"),
    ("bash -c \"bash -c 'sh -c \\\"rm x\\\"'\"", "rm x"),
    ("bash <<'EOF'\nrm x\nEOF", "rm x"),
    ("sh <<< 'rm x'", "rm x"),
    ("env -S 'rm -f' x", "rm -f x"),
    ("eval 'rm x'", "rm x"),
    ("alias ls='rm x'", "rm x"),
    ("trap 'rm x' EXIT", "rm x"),
    ("echo $(rm x)", "rm x"),
    ("echo \"$(rm x)\"", "rm x"),
    ("echo `rm x`", "rm x"),
    ("echo ${y:-$(rm x)}", "rm x"),
    ("echo $(( $(rm x) + 1 ))", "rm x"),
    ("cat <(rm x)", "rm x"),
    ("cat <<EOF\n$(rm x)\nEOF", "rm x"),
    ("x=$(rm x)", "rm x"),
    ("if true; then rm x; fi", "rm x"),
    ("while false; do rm x; done", "rm x"),
    ("{ rm x; }", "rm x"),
    ("f() { rm x; }", "rm x"),
    ("function f { rm x; }", "rm x"),
    ("case $y in a|b) rm x;; esac", "rm x"),
    ("[[ -n $(rm x) ]]", "rm x"),
    ("((y = $(rm x)))", "rm x"),
    ("x=$((echo a) ; rm x )", "rm x"),
    ("echo $'a\\'b' $(rm x)", "rm x"),
])
def test_a_deny_reading_sees_through(text: str, command: str) -> None:
    """Keywords, assignments, quoting, wrappers with their options, shells' -c bodies and standard input, eval,
    aliases, traps, substitutions and here-documents: the command inside is among the commands seen."""
    assert command in seen(text), seen(text)


def test_case_patterns_and_for_lists_are_not_commands() -> None:
    """Words in `case` patterns and `for` lists are data, not command words."""
    assert seen("case $y in rm|mv) ls;; (cp) ls;; esac") == ["ls", "ls"]
    assert seen("for rm in a b; do ls; done") == ["ls"]


def test_an_option_a_wrapper_table_does_not_know_offers_every_later_word() -> None:
    """`timeout --weird 5 rm x`: the reader does not guess which words the option takes; each later position
    is offered as a possible command, so `rm x` is among them."""
    assert "rm x" in seen("timeout --weird 5 rm x")
    assert not read_command("timeout --weird 5 rm x").reading.opaque


@pytest.mark.parametrize(("text", "where"), [
    ("$cmd -f x", "`$cmd`"),
    ("c=rm; $c -f x", "`$c`"),
    ("$(echo rm) -f x", "`$(echo rm)`"),
    ("`echo rm` -f x", "`echo rm`"),
    ("/bin/r? -f x", "`/bin/r?`"),
    ("{rm,-f,x}", "`{rm,-f,x}`"),
    ("env $cmd x", "`$cmd`"),
    ("eval \"$x\"", "`eval`"),
    ("source ./x.sh", "`source`"),
    (". ./x.sh", "`.`"),
    ("echo rm x | sh", "standard input"),
    ("bash < x.sh", "standard input"),
    ("bash -c \"$x\"", "`bash -c`"),
    ("echo ${x@P}", "prompt"),
])
def test_where_a_command_word_cannot_be_read_it_says_so(text: str, where: str) -> None:
    """An expansion, glob or brace in command position, eval of a variable, source, a shell fed from a pipe or
    a file, a prompt expansion: the reading is opaque there, with the reason."""
    opaque = read_command(text).reading.opaque
    assert any(where in o for o in opaque), opaque


def test_a_script_file_is_not_read_and_not_opaque() -> None:
    """`sh ./x.sh` runs a file the reader does not open (a documented limit), like any program would."""
    reading = read_command("sh ./x.sh").reading
    assert not reading.opaque and seen("sh ./x.sh") == ["sh ./x.sh"]


def test_a_nul_byte_makes_the_text_invalid() -> None:
    reading = read_command("touch a\x00b").reading
    assert reading.invalid is not None and "NUL" in reading.invalid
    assert reading.single is None


def test_shell_bodies_are_read_to_a_bounded_depth() -> None:
    """`bash -c` inside `bash -c` is read MAX_DEPTH levels deep; deeper is opaque, not a crash."""
    text = "rm x"
    for _ in range(MAX_DEPTH + 2):
        text = "bash -c " + "'" + text.replace("'", "'\\''") + "'"
    reading = read_command(text).reading
    assert any("nested more than" in o for o in reading.opaque), reading.opaque


@pytest.mark.parametrize("text", [
    "echo " + "$(" * 3000 + "rm x" + ")" * 3000,
    "echo ${a:-" * 3000 + "$(rm x)" + "}" * 3000,
    "echo " + '"$(' * 2000 + ")\"" * 2000,
    "env " * 5000 + "rm x",
    "timeout --weird " * 300 + "rm x",
    "(" * 5000 + "rm x" + ")" * 5000,
    "echo " + "'a' " * 50000,
    "'" * 10001,
    "$((" * 3000,
    "<<" * 3000,
])
def test_deep_or_long_input_is_answered_not_crashed(text: str) -> None:
    """However deep or long, the reader answers (opaque or uncertain where it has to), never RecursionError."""
    reading = read_command(text).reading
    assert reading.single is None or reading.single.words


def test_too_many_commands_are_opaque() -> None:
    text = "timeout --weird " * 40 + "rm x"
    reading = read_command(text).reading
    assert len(reading.commands) <= MAX_COMMANDS + 1
    assert any("more than" in o for o in reading.opaque) or "rm x" in seen(text)
