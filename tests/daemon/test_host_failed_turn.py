"""A driver attached when its turn fails still drives the session alone: SessionHost with a real SQLite file, the
scripted model and the real `strata` CLI beside it. The model stands in for a remote service whose failure reaches
the host as an error of the run (not as the loop's `failed` outcome, which keeps the lease): the host lets the lease
go and reads the session again. It used to stay so (phase `released`) with the driver still attached, and `strata
resume ID PROMPT` from another terminal ran the session meanwhile; now the lease is taken back for the driver."""

from __future__ import annotations

from pathlib import Path

import anyio

from agent.models import model_from_spec
from core.errors import StoreError
from core.model import ModelAdapter, ModelListener, ModelRequest, ModelResponse
from memory.restore import restore
from tests.conftest import StrataCLI
from tests.daemon._support import host_on, is_result, read_until, script, text


class _FailsOnce:
    """The scripted model, whose first call fails with an error the loop does not turn into an outcome."""

    def __init__(self, model: ModelAdapter, failures: list[str]) -> None:
        self._model = model
        self._failures = failures

    @property
    def name(self) -> str:
        return self._model.name

    async def complete(self, request: ModelRequest, listener: ModelListener | None = None) -> ModelResponse:
        if self._failures:
            raise StoreError(self._failures.pop())
        return await self._model.complete(request, listener)


async def test_a_driver_attached_when_its_turn_fails_gets_the_lease_back_and_no_other_process_runs_it(
        strata_home: Path, workspace: Path, tmp_path: Path, cli: StrataCLI) -> None:
    failures = ["the store was busy for too long"]
    model = script(tmp_path / "s.json", [text("hi")])
    async with host_on(strata_home, model_factory=lambda spec: _FailsOnce(model_from_spec(spec), failures)) as (
            rt, host):
        sid = await host.new_session(workspace=workspace, model=model)
        driver = await host.attach(sid, "drive")
        await host.prompt(driver, "say hi")
        (*_, result) = await read_until(driver, is_result)
        assert getattr(result, "status", None) == "failed", result
        assert (await rt.store.get_session(sid)).lease is not None  # taken back for the driver still attached
        before = (await restore(rt.store, sid)).state.last_seq
        proc = await anyio.to_thread.run_sync(lambda: cli.run("resume", sid, "from another terminal"))
        assert proc.returncode == 1 and f"session {sid} is active" in proc.stderr, proc.stderr
        assert (await restore(rt.store, sid)).state.last_seq == before
        await host.prompt(driver, "say hi again")
        (*_, again) = await read_until(driver, is_result)
        assert getattr(again, "status", None) == "completed", again
