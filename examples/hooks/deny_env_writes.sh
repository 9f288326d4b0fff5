#!/bin/sh
# .strata/deny_env_writes.sh: refuse writes to .env files, let everything else through
if grep -q '"path": *"[^"]*\.env"' ; then
  echo '{"decision": "block", "reason": "never write .env files"}'
fi
