"""Choosing the model adapter from `--model` (`script:PATH`, `anthropic:NAME`)."""

from __future__ import annotations

from pathlib import Path

from core.errors import UsageError
from core.model import ModelAdapter
from core.model.scripted import ScriptedModel


def model_from_spec(spec: str | None) -> ModelAdapter:
    if not spec:
        raise UsageError("no model chosen",
                         hint="pass --model script:PATH for the offline scripted model (see examples/), "
                              "or set STRATA_MODEL")
    kind, _, rest = spec.partition(":")
    if kind == "script" and rest:
        return ScriptedModel.from_file(Path(rest).expanduser().resolve())
    if kind == "anthropic":
        raise UsageError("the anthropic adapter is not built yet (it lands with the model-path issue)",
                         hint="use --model script:PATH for now")
    raise UsageError(f"unknown model {spec!r}", hint="use script:PATH or anthropic:NAME")
