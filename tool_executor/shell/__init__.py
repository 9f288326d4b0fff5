"""Reading a bash command line for the policy check: which simple commands it runs, whether an allow pattern
may vouch for it, and where a deny pattern cannot see (README: Policy rules; Guarantees).

Our own conservative reader, not a shell: it never expands or runs anything, and says so where it cannot be
sure, rather than depend on a parser library whose idea of bash may differ from bash's. Its agreement with a
real parser is property-tested (tests/tool_executor/shell/)."""

from tool_executor.shell._command_line import CommandLine, read_command
from tool_executor.shell._reader import MAX_DEPTH, Reading, SimpleCommand

__all__ = ["MAX_DEPTH", "CommandLine", "Reading", "SimpleCommand", "read_command"]
