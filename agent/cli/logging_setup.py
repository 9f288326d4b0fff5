"""When a command sets up logging. Most commands get it from the group before they run (agent/cli/main.py);
`strata run` and `strata resume` once they have imported what they run, after their arguments are parsed
(agent/cli/_lazy.py `Entry.settles`). A command with a quick way (`strata timeline`: agent/cli/quick_timeline.py)
gets it only when it takes the full way, so the quick way imports neither structlog nor the logging setup;
`--verbose` always means the full way, since it asks to see what the runtime does. `strata show`, which seldom
logs, gets it at its first record."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _FullWay:
    verbose: bool = False
    deferred: bool = False

    def defer(self, verbose: bool) -> None:
        """The group leaves the setup to the command."""
        self.verbose, self.deferred = verbose, True

    def asked(self) -> bool:
        """Whether the command must take the full way (`--verbose`)."""
        return self.verbose

    def enter(self) -> None:
        """Set up logging as the group would have (once; nothing when the group already did)."""
        if not self.deferred:
            return
        self.deferred = False
        setup(self.verbose)

    def enter_at_first_record(self) -> None:
        """As `enter`, for a command that seldom logs (`strata show`): the setup, and structlog with it, waits for
        the first record at INFO or above (observability/deferred_logging.py), which it then masks and shows or
        keeps as `enter` would have. `--verbose` asks to see everything: set up at once."""
        if not self.deferred or self.verbose:
            self.enter()
            return
        self.deferred = False
        from observability import set_up_at_first_record

        set_up_at_first_record(lambda: setup(False))


def setup(verbose: bool) -> None:
    """structlog without rich (agent/cli/_plain_structlog.py), then the logging configuration."""
    from agent.cli._plain_structlog import import_structlog_plain

    import_structlog_plain()
    from observability import configure_logging

    configure_logging(verbose)  # the entry point configures logging, once; the runtime never does


full_way = _FullWay()
"""The command line's one: a process runs one command."""
