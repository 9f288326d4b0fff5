"""A PreToolUse hook for the MCP tests: blocks closing issue 13, has no opinion otherwise."""

import json
import sys

call = json.load(sys.stdin)
if call["input"].get("number") == 13:
    print(json.dumps({"decision": "block", "reason": "issue 13 stays open"}))
