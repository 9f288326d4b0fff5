"""The agent: the loop and its phases, sessions (run, resume, fork, reconcile), the command line, the interactive
terminal, and the serve daemon (its host, IPC layer and the glue between them)."""
