"""The model a session uses when neither `--model` nor the config (`model`, STRATA_MODEL) names one: the same for
`strata run` as for `strata chat` (agent/cli/chat_cmd.py DEFAULT_CHAT_MODEL; tests/cli/test_ids_and_hints.py
keeps the two equal). `anthropic` is the API's default model; it needs ANTHROPIC_API_KEY."""

from __future__ import annotations

DEFAULT_MODEL_SPEC = "anthropic"
