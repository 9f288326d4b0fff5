"""Commands that run another command given in their arguments, and how their options are spelled.

`env -i rm x`, `timeout -s KILL 5 rm x`, `xargs -n1 rm`, `find . -exec rm {} ;`: the command they run is found by
reading their options exactly as the program does. An option a table does not know is not guessed past: every
later word is then offered as a possible start of the command, so a deny pattern still meets `rm` however the
options were spelled (`Unwrapped.exact` is False and the reader never treats such a guess as certain)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tool_executor.shell._lexer import Word

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Wrapper:
    flags: frozenset[str] = frozenset()
    """Options without an argument (short ones may be bundled: `-ik`)."""
    with_arg: frozenset[str] = frozenset()
    """Options that take an argument: the next word, attached (`-uroot`), or after `=` (`--user=root`)."""
    positionals: int = 0
    """Operands before the command (timeout's duration, chroot's new root)."""
    assignments: bool = False
    """`NAME=VALUE` words may come before the command (env, sudo)."""
    numeric: bool = False
    """`-N` is an option (nice -10)."""
    default: tuple[str, ...] = ()
    """What runs when no command is given (xargs runs echo)."""
    split_string: frozenset[str] = frozenset()
    """Options whose argument is itself split into a command (env -S)."""


def _w(flags: str = "", with_arg: str = "", **kw: object) -> Wrapper:
    return Wrapper(frozenset(flags.split()), frozenset(with_arg.split()), **kw)  # type: ignore[arg-type]


WRAPPERS: dict[str, Wrapper] = {
    "env": _w("-i - -0 --null --ignore-environment -v --debug",
              "-u --unset -C --chdir -S --split-string -a --argv0 --block-signal --default-signal --ignore-signal",
              assignments=True, split_string=frozenset({"-S", "--split-string"})),
    "command": _w("-p -v -V"),
    "builtin": _w(),
    "exec": _w("-c -l", "-a"),
    "nice": _w("", "-n --adjustment", numeric=True),
    "nohup": _w(),
    "setsid": _w("-c --ctty -f --fork -w --wait"),
    "stdbuf": _w("", "-i -o -e --input --output --error"),
    "timeout": _w("--preserve-status --foreground -v --verbose", "-s --signal -k --kill-after", positionals=1),
    "sudo": _w("-A --askpass -b --background -E --preserve-env -H --set-home -i --login -k --reset-timestamp "
               "-K -n --non-interactive -P --preserve-groups -S --stdin -s --shell -N --no-update",
               "-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -R --chroot -r --role "
               "-t --type -T --command-timeout -U --other-user", assignments=True),
    "doas": _w("-n -s", "-u -C"),
    "ionice": _w("-t --ignore", "-c --class -n --classdata"),
    "chroot": _w("", "--userspec --groups", positionals=1),
    "xargs": _w("-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit -o --open-tty",
                "-a --arg-file -d --delimiter -E --eof -I --replace -L --max-lines -n --max-args -P --max-procs "
                "-s --max-chars --process-slot-var", default=("echo",)),
    "busybox": _w(),
    "time": _w("-p"),
}
"""Programs (and the `command`, `builtin`, `exec` and `time` words) that run the command in their operands."""

_OPTIONAL_ATTACHED = {"xargs": frozenset({"-e", "-i", "-l"})}
"""Options whose argument may only be attached (`xargs -i{}`); alone they take none."""


@dataclass(frozen=True)
class Unwrapped:
    candidates: tuple[tuple[Word, ...], ...]
    """The command that runs, or, when `exact` is False, each word position it might start at."""
    exact: bool
    split: str | None = None
    """Text that env -S splits into the command (the reader reads it as a command line)."""


def unwrap(name: str, args: Sequence[Word]) -> Unwrapped:
    """What `name ARGS...` runs, for a wrapper `name` in WRAPPERS."""
    spec = WRAPPERS[name]
    attached_only = _OPTIONAL_ATTACHED.get(name, frozenset())
    i = 0
    while i < len(args):
        word = args[i].value
        if word == "--":
            i += 1
            break
        if word in spec.flags:
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            if spec.assignments and _ASSIGNMENT.match(word):
                i += 1
                continue
            break
        option, eq, attached = word.partition("=") if word.startswith("--") else (word[:2], "", word[2:])
        if option in spec.split_string:
            text = attached if (eq or attached) else (args[i + 1].value if i + 1 < len(args) else "")
            rest = args[i + 1 if (eq or attached) else i + 2:]
            return Unwrapped((), True, split=" ".join([text, *(_quote(w.value) for w in rest)]))
        if option in spec.with_arg:
            i += 1 if (eq or attached) else 2
            continue
        if option in attached_only:
            i += 1
            continue
        if not word.startswith("--") and all(f"-{c}" in spec.flags for c in word[1:]):
            i += 1
            continue
        if spec.numeric and word[1:].isdigit():
            i += 1
            continue
        return Unwrapped(tuple(tuple(args[k:]) for k in range(i + 1, len(args))), False)
    i += spec.positionals
    inner = tuple(args[i:])
    if not inner:
        return Unwrapped((tuple(Word(d, d) for d in spec.default),) if spec.default else (), True)
    return Unwrapped((inner,), True)


def find_actions(args: Sequence[Word]) -> tuple[tuple[Word, ...], ...]:
    """The commands of `find ... -exec CMD ... ;` (and `-execdir`, `-ok`, `-okdir`, ending with `;` or `+`)."""
    found: list[tuple[Word, ...]] = []
    i = 0
    while i < len(args):
        if args[i].value in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(args) and args[end].value not in (";", "+"):
                end += 1
            if end > i + 1:
                found.append(tuple(args[i + 1:end]))
            i = end
        i += 1
    return tuple(found)


SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "fish"})
_SHELL_WITH_ARG = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})


@dataclass(frozen=True)
class ShellCall:
    body: Word | None
    """The `-c` command text."""
    script: Word | None
    """A script file operand (not read)."""
    stdin: bool
    """Reads its commands from standard input."""


def shell_call(args: Sequence[Word]) -> ShellCall:
    """How `bash ARGS...` gets its commands: `-c TEXT`, a script file, or standard input."""
    command = False
    i = 0
    while i < len(args):
        word = args[i].value
        if word in ("--", "-"):
            i += 1
            break
        if word in _SHELL_WITH_ARG:
            i += 2
            continue
        if word.startswith("--"):
            i += 1
            continue
        if word[:1] in "-+" and len(word) > 1:
            command = command or (word[0] == "-" and "c" in word[1:])
            i += 1
            continue
        break
    operand = args[i] if i < len(args) else None
    if command:
        return ShellCall(operand, None, False)
    return ShellCall(None, operand, operand is None)


def _quote(value: str) -> str:
    return value if re.fullmatch(r"[\w@%+=:,./-]+", value) else "'" + value.replace("'", "'\\''") + "'"
