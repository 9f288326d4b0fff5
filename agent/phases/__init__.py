"""The loop's phases that are more than a step of it, one module each: perceive (build the request from folded
state), plan (review the model's answer and type it into a proposal) and reflect (judge a proposal to finish).
commit, act and observe are the loop's own few lines around the session writer and the executor
(agent/loop.py, tool_executor/); the loop fixes the order of all six."""
