"""`strata serve`: the glue between the IPC layer (agent/ipc: the socket, the protocol) and the session host
(agent/daemon: many sessions in one process). `HostDispatcher` answers the IPC server's requests with the host and
pumps each attachment's messages to its connection as they happen; `serve` runs the daemon until it is drained;
`daemonize` detaches it from the terminal. The two layers it joins do not import each other."""

from agent.serve._daemon import DRAIN_SIGNALS, serve, server_name
from agent.serve._detach import Readiness, Started, daemonize
from agent.serve._dispatcher import HostDispatcher

__all__ = ["DRAIN_SIGNALS", "HostDispatcher", "Readiness", "Started", "daemonize", "serve", "server_name"]
