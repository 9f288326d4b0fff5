"""Commands that run another command given in their arguments, and how their options are spelled.

`env -i rm x`, `timeout -s KILL 5 rm x`, `xargs -n1 rm`, `find . -exec rm {} ;`: the command they run is found by
reading their options exactly as the program does. An option a table does not know is not guessed past: every
later word is then offered as a possible start of the command, so a deny pattern still meets `rm` however the
options were spelled (`Unwrapped.exact` is False and the reader never treats such a guess as certain)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from core.record import record
from tool_executor.shell._lexer import Word

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@record
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
    command_text: frozenset[str] = frozenset()
    """Options whose argument is itself a command line (env -S, flock -c, su -c)."""
    shell_operands: bool = False
    """After its options and positionals, the rest are a shell's arguments (`su root -c 'cmd'`)."""


def _w(flags: str = "", with_arg: str = "", **kw: object) -> Wrapper:
    return Wrapper(frozenset(flags.split()), frozenset(with_arg.split()), **kw)  # type: ignore[arg-type]


WRAPPERS: dict[str, Wrapper] = {
    "env": _w("-i - -0 --null --ignore-environment -v --debug",
              "-u --unset -C --chdir -S --split-string -a --argv0 --block-signal --default-signal --ignore-signal",
              assignments=True, command_text=frozenset({"-S", "--split-string"})),
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
    "taskset": _w("-a --all-tasks -c --cpu-list", positionals=1),
    "chrt": _w("-a --all-tasks -b --batch -d --deadline -f --fifo -i --idle -o --other -r --rr -R "
               "--reset-on-fork -v --verbose", "-T --sched-runtime -P --sched-period -D --sched-deadline",
               positionals=1),
    "flock": _w("-s --shared -x -e --exclusive -u --unlock -n --nb --nonblock -o --close -F --no-fork --verbose",
                "-w --wait --timeout -E --conflict-exit-code -c --command", positionals=1,
                command_text=frozenset({"-c", "--command"})),
    "unshare": _w("-m --mount -u --uts -i --ipc -n --net -p --pid -U --user -C --cgroup -T --time -f --fork "
                  "-r --map-root-user -c --map-current-user --kill-child --mount-proc",
                  "--propagation --setgroups -S --setuid -G --setgid -R --root -w --wd"),
    "strace": _w("-f -ff -c -C -d -D -i -k -q -qq -r -t -tt -ttt -T -v -x -xx -y -yy -z -Z -n -w",
                 "-e -o -p -s -u -a -b -I -O -P -S -X -E"),
    "watch": _w("-b --beep -c --color -d --differences -e --errexit -g --chgexit -t --no-title -x --exec "
                "-p --precise -w --no-wrap", "-n --interval -q --equexit"),
    "su": _w("- -l --login -m -p --preserve-environment -P --pty -f", "-c --command -g --group -G "
             "--supp-group -s --shell -w --whitelist-environment", positionals=1, shell_operands=True,
             command_text=frozenset({"-c", "--command"})),
    "runuser": _w("- -l --login -m -p --preserve-environment -P --pty -f", "-c --command -g --group -G "
                  "--supp-group -s --shell -w --whitelist-environment -u --user", positionals=1,
                  shell_operands=True, command_text=frozenset({"-c", "--command"})),
}
"""Programs (and the `command`, `builtin`, `exec` and `time` words) that run the command in their operands."""

_OPTIONAL_ATTACHED = {"xargs": frozenset({"-e", "-i", "-l"})}
"""Options whose argument may only be attached (`xargs -i{}`); alone they take none."""


@record
class Unwrapped:
    inner: tuple[Word, ...]
    """The command that runs; when `exact` is False, the words it starts somewhere in."""
    exact: bool
    split: str | None = None
    """A command line given as one argument (env -S, flock -c, su -c): the reader reads it as a line."""
    shell_args: tuple[Word, ...] | None = None
    """Arguments passed to a shell (`su root -c 'cmd'` runs `sh -c 'cmd'`)."""

    def candidates(self) -> Iterator[tuple[Word, ...]]:
        """The command, or each place it might start (made one at a time: the reader may stop early)."""
        if self.exact:
            if self.inner:
                yield self.inner
            return
        for k in range(len(self.inner)):
            yield self.inner[k:]


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
        if option in spec.command_text:
            text = attached if (eq or attached) else (args[i + 1].value if i + 1 < len(args) else "")
            if spec.shell_operands or name == "flock":
                return Unwrapped((), True, split=text)
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
        return Unwrapped(tuple(args[i + 1:]), False)
    if name == "runuser" and any(w.value in ("-u", "--user") or w.value.startswith("--user=") for w in args[:i]):
        return Unwrapped(tuple(args[i:]), True)  # `runuser -u USER CMD...` runs CMD itself, with no shell
    i += spec.positionals
    if spec.command_text and i + 1 < len(args) and args[i].value in spec.command_text:
        return Unwrapped((), True, split=args[i + 1].value)  # `flock FILE -c CMD`
    if spec.shell_operands:
        return Unwrapped((), True, shell_args=tuple(args[i:]))
    inner = tuple(args[i:]) or tuple(Word(d, d) for d in spec.default)
    return Unwrapped(inner, True)


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


@record
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
