"""`strata knowledge list | search QUERY | get ID | rebuild`: the local knowledge index for people.

Every command reads the datasets the config declares for `--workspace` (a project's own only once it is trusted),
and search and get take the same path as the agent's tools (memory/knowledge/_service.py), as a session in
`--mode` would: the dataset grant is checked before any file is read. A miss is one line and a hint on stderr (with
`--json`, the miss object on stdout) and exit 1; a bad config is exit 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, ParamSpec, TypeVar, get_args

import click

from agent.cli._common import Command, error_masker, fail
from agent.cli.options import WorkspacePath
from agent.cli.output import echo, echo_json
from config import LoadedConfig, dataset_roots, found_datasets, project_roots
from core.errors import StrataError
from core.events import Mode
from core.knowledge import DEFAULT_LIMIT, MAX_LIMIT
from core.masking import Masker

if TYPE_CHECKING:  # loaded by the commands that use them, so `strata` starts without the knowledge models
    from core.knowledge import Corpus, Hit, Hits, Miss
    from memory.knowledge import KnowledgeService

EXIT_MISS = 1
P = ParamSpec("P")
R = TypeVar("R")


def _errors(fn: Callable[P, R]) -> Callable[P, R]:
    """A Strata error (an unreadable index, a home that cannot be written) is one line and a hint, exit 1."""
    @wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except StrataError as err:
            fail(err)
    return run

_workspace = click.option("--workspace", type=WorkspacePath(), default=".", show_default=True,
                          help="Whose project datasets (.strata/knowledge/, once trusted) and config to read.")
_json = click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
_mode = click.option("--mode", type=click.Choice(get_args(Mode)), default="interactive", show_default=True,
                     help="Read as a session in this mode would (its dataset grants apply).")
_dataset = click.option("--dataset", default=None, metavar="D", help="Only this dataset.")


@click.group(name="knowledge")
def knowledge() -> None:
    """The local knowledge index: operating procedures found by exact id or by their discriminating words."""


@knowledge.command(name="list")
@_workspace
@_json
@_errors
def list_cmd(workspace: Path, as_json: bool) -> None:
    """Declared datasets (grants, documents, where they are read from), problems, and undeclared ones found."""
    from memory.knowledge import KnowledgeIndex

    loaded = _loaded(workspace)
    corpus = _corpus(loaded, workspace)
    manifest = corpus.manifest
    grants = loaded.knowledge.grants()
    undeclared = {n: p for n, p in found_datasets(workspace=workspace, project_trusted=loaded.project_trusted).items()
                  if n not in grants}
    index = KnowledgeIndex(loaded.settings.home, corpus)
    if as_json:
        for entry in manifest.datasets:
            g = grants[entry.name]
            echo_json({"type": "dataset", "name": entry.name, "documents": entry.documents, "modes": list(g.modes),
                       "pii": g.pii, "declared_in": g.source, "roots": list(entry.roots)})
        for p in manifest.problems:
            echo_json({"type": "problem", **p.model_dump(mode="json")})
        for name, paths in undeclared.items():
            echo_json({"type": "undeclared", "name": name, "roots": [str(p) for p in paths]})
        echo_json({"type": "manifest", "digest": manifest.digest, "documents": len(manifest.documents),
                   "problems": len(manifest.problems), "index": str(index.path), "index_built": index.path.exists()})
        return
    if not manifest.datasets:
        echo("no knowledge datasets are declared (config: [knowledge.datasets.NAME] with path, pii, modes)")
    for entry in manifest.datasets:
        g = grants[entry.name]
        echo(f"{entry.name}: {entry.documents} document(s), pii {g.pii}, modes {', '.join(g.modes) or 'none'} "
             f"(declared in {g.source})")
        for root in entry.roots:
            echo(f"  from {root}")
    if manifest.problems:
        echo(f"{len(manifest.problems)} problem(s), left out of the index:")
        for p in manifest.problems:
            echo(f"  {p.line()}")
    for name, paths in undeclared.items():
        echo(f"{name}: found at {', '.join(str(p) for p in paths)} but not declared, so nothing may read it "
             f"([knowledge.datasets.{name}] modes = [...])")
    state = "built" if index.path.exists() else "not built yet"
    echo(f"manifest {manifest.digest}: {len(manifest.documents)} document(s); index {state} ({index.path})")


@knowledge.command()
@click.argument("query")
@_dataset
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=DEFAULT_LIMIT, show_default=True)
@_mode
@_workspace
@_json
@_errors
def search(query: str, dataset: str | None, limit: int, mode: Mode, workspace: Path, as_json: bool) -> None:
    """Documents holding QUERY's discriminating words, best first (deterministic: ties by dataset, then id). The
    excerpts, names and paths are masked as every other output is (a secret a document holds is not printed)."""
    loaded = _loaded(workspace)
    service = _service(workspace, dataset, mode, as_json, loaded)
    answer = service.search(query, mode=mode, dataset=dataset, limit=limit)
    _answer(_masked(answer, _masker(loaded)), as_json, whole=False)


def _masker(loaded: LoadedConfig) -> Masker:
    """The home's masker, as the reading commands use it (its key, the configured and remembered secrets), so the
    same secret shows the same fingerprint as in every other output. A document is not session text: what it
    holds is not remembered in `masking.seen`."""
    from agent.reading import reading_masker

    try:
        masker = reading_masker(loaded)
    except (StrataError, OSError):  # an unreadable key: the patterns and known values still mask
        return error_masker(loaded)
    masker.on_known = None
    return masker


def _masked(answer: Hits | Miss, masker: Masker) -> Hits | Miss:
    """The hits with what a document or its place can hold masked: text, id, file name, tags and path (the
    digests stay those of the file as it is)."""
    from core.knowledge import Hits

    if not isinstance(answer, Hits):
        return answer
    mask = masker.mask
    return answer.model_copy(update={"hits": tuple(
        hit.model_copy(update={"text": mask(hit.text), "id": mask(hit.id), "filename": mask(hit.filename),
                               "tags": tuple(mask(t) for t in hit.tags), "source_path": mask(hit.source_path)})
        for hit in answer.hits)})


@knowledge.command()
@click.argument("doc_id", metavar="ID")
@_dataset
@_mode
@_workspace
@_json
@_errors
def get(doc_id: str, dataset: str | None, mode: Mode, workspace: Path, as_json: bool) -> None:
    """The document whose id is exactly ID (`doc:ID` works too), whole, with its digests."""
    service = _service(workspace, dataset, mode, as_json)
    _answer(service.get(doc_id, mode=mode, dataset=dataset), as_json, whole=True)


@knowledge.command()
@_workspace
@_json
@_errors
def rebuild(workspace: Path, as_json: bool) -> None:
    """Build the index of the current manifest again, and put it in place atomically."""
    from memory.knowledge import KnowledgeIndex

    loaded = _loaded(workspace)
    corpus = _corpus(loaded, workspace)
    report = KnowledgeIndex(loaded.settings.home, corpus).rebuild()
    manifest = corpus.manifest
    if as_json:
        echo_json({"type": "rebuild", "digest": report.digest, "documents": report.documents,
                   "datasets": len(manifest.datasets), "problems": len(manifest.problems),
                   "seconds": round(report.seconds, 3), "index": str(report.path)})
        return
    echo(f"built index {report.digest}: {report.documents} document(s) in {len(manifest.datasets)} dataset(s), "
         f"{len(manifest.problems)} problem(s), {report.seconds:.2f} s ({report.path})")


def _loaded(workspace: Path) -> LoadedConfig:
    return Command().config(workspace)


def _corpus(loaded: LoadedConfig, workspace: Path) -> Corpus:
    from memory.knowledge import load_corpus

    roots = dataset_roots(loaded.knowledge, workspace=workspace, project_trusted=loaded.project_trusted)
    return load_corpus(roots, workspace=workspace, project_roots=project_roots(
        loaded.knowledge, workspace=workspace, project_trusted=loaded.project_trusted))


def _service(workspace: Path, dataset: str | None, mode: Mode, as_json: bool,
             loaded: LoadedConfig | None = None) -> KnowledgeService:
    """The service over the current corpus, once the grant allows the request: a refusal is printed before any
    document is read or the index is touched."""
    from core.knowledge import Miss, check_scope
    from memory.knowledge import KnowledgeIndex, KnowledgeService

    loaded = loaded or _loaded(workspace)
    grants = loaded.knowledge.grants()
    scope = check_scope(grants, dataset, mode)
    if isinstance(scope, Miss):
        _miss(scope, as_json)
    corpus = _corpus(loaded, workspace)
    if corpus.manifest.problems:
        echo(f"strata: notice: {len(corpus.manifest.problems)} file(s) are left out of the index "
             "(strata knowledge list says why)", err=True)
    index = KnowledgeIndex(loaded.settings.home, corpus, on_replaced=_replaced)
    return KnowledgeService(grants=grants, index=index, common_term_share=loaded.knowledge.common_term_share)


def _replaced(line: str) -> None:
    echo(f"strata: notice: {line}", err=True)


def _answer(answer: Hits | Miss, as_json: bool, *, whole: bool) -> None:
    from core.knowledge import Miss

    if isinstance(answer, Miss):
        _miss(answer, as_json)
    if as_json:
        echo_json(answer.model_dump(mode="json"))
        return
    for number, hit in enumerate(answer.hits, start=1):
        _hit(number, hit, whole)
    echo(f"manifest {answer.manifest_digest}")


def _hit(number: int, hit: Hit, whole: bool) -> None:
    how = f"lexical, score {hit.score:.4f}, matched {', '.join(hit.matched_terms)}" if hit.method == "lexical" \
        else "exact"
    tags = f"  tags {', '.join(hit.tags)}" if hit.tags else ""
    echo(f"{number}. {hit.dataset}/{hit.id} ({how}){tags}")
    echo(f"   {hit.source_path} bytes {hit.byte_range[0]}-{hit.byte_range[1]}")
    echo(f"   content sha256 {hit.content_sha256}  source sha256 {hit.source_sha256}")
    if whole:
        echo(hit.text, nl=not hit.text.endswith("\n"))
        return
    for line in hit.text.rstrip("\n").split("\n"):
        echo(f"   | {line}")


def _miss(miss: Miss, as_json: bool) -> NoReturn:
    if as_json:
        echo_json(miss.model_dump(mode="json"))
    else:
        echo(f"strata: miss: {miss.kind}: {miss.reason}", err=True)
        if miss.hint:
            echo(f"hint: {miss.hint}", err=True)
    sys.exit(EXIT_MISS)

