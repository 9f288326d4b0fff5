"""Which datasets a request may read, decided from config alone, before any lookup.

A dataset is readable in a mode only when config declares it (`[knowledge.datasets.NAME]`) and lists the mode in
its `modes`. A request that names an undeclared dataset is `unknown_dataset`, one that names a dataset not granted
to its mode is `dataset_denied`; both name the grant that is missing. A request that names no dataset reads every
dataset granted to its mode."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from core.events import Mode
from core.knowledge._results import Miss
from core.tools.spec import PII_ORDER, PiiClass


class DatasetGrant(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    pii: PiiClass
    modes: tuple[Mode, ...]
    source: str
    """The config file that declared the dataset."""


def check_scope(grants: Mapping[str, DatasetGrant], dataset: str | None, mode: Mode) -> tuple[str, ...] | Miss:
    """The datasets a request may read (sorted), or the refusal."""
    if dataset is not None:
        grant = grants.get(dataset)
        if grant is None:
            declared = ", ".join(sorted(grants)) or "none"
            return Miss(kind="unknown_dataset", dataset=dataset,
                        reason=f"dataset {dataset!r} is not declared (declared: {declared})",
                        missing_grant=f'[knowledge.datasets.{dataset}] modes = ["{mode}"]',
                        hint=f'a person declares it in a config file: [knowledge.datasets.{dataset}] with '
                             f'modes = ["{mode}"]')
        if mode not in grant.modes:
            granted = ", ".join(grant.modes) or "no mode"
            return Miss(kind="dataset_denied", dataset=dataset,
                        reason=f"dataset {dataset!r} is not granted to mode {mode!r} (granted to: {granted})",
                        missing_grant=f'"{mode}" in [knowledge.datasets.{dataset}] modes ({grant.source})',
                        hint=f'a person adds "{mode}" to modes of [knowledge.datasets.{dataset}] in {grant.source}')
        return (dataset,)
    granted_here = tuple(sorted(name for name, g in grants.items() if mode in g.modes))
    if not granted_here:
        what = "no dataset is declared" if not grants else f"no declared dataset is granted to mode {mode!r}"
        return Miss(kind="dataset_denied", reason=what,
                    missing_grant=f'[knowledge.datasets.NAME] modes = ["{mode}"]',
                    hint=f'a person grants a dataset in a config file: [knowledge.datasets.NAME] modes = ["{mode}"]')
    return granted_here


def pii_of(grants: Mapping[str, DatasetGrant], mode: Mode) -> PiiClass:
    """The PII class of what a mode may read: the highest of its granted datasets' (`none` when none)."""
    classes = [g.pii for g in grants.values() if mode in g.modes]
    return max(classes, key=PII_ORDER.index, default="none")
