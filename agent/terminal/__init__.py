"""The interactive terminal: `strata chat` (prompt_toolkit input, rich output) and the terminal approver."""
