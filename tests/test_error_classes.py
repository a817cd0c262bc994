"""Every exception class in the package is one of the two kinds the CLI reports, or internal.

Read from the source like ``test_import_rules.py``: a class whose bases lead to a built-in
exception must also lead to ``errors.PolylogueInputError`` (bad input: one line, exit 2) or
``errors.RunStopped`` (a run stopped early: one line, exit 1), so that it reaches the one CLI
handler in ``cli/__init__.py``. The few that never reach the CLI are listed in ``INTERNAL`` with
the reason; a new class must pick a base or be added there on purpose.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "polylogue"

BASES = {"PolylogueInputError", "RunStopped"}

#: module:class -> why it may stay outside the two bases.
INTERNAL: dict[str, str] = {
    "llm.openai:RequestRejected": "one request refused; the task adapters record it per item",
    "llm.openai:ServerConfigError": "the task adapters turn it into PredictionError/RunStopped",
    "llm.openai:RetriesExhausted": "the task adapters turn it into PredictionError/RunStopped",
    "llm.openai:_Retryable": "private retry signal inside the client",
    "runs:ChunkFailed": "carries a partial chunk's records; run_chunks saves them, re-raises",
    "models.base:PredictionError": "carries finished predictions; the runners save them and "
    "raise RunError (a RunStopped)",
    "tom.backends:GenerationError": "per-record failure; the MeetingToM runner records it",
    "llm.openai:MalformedResponse": "a RequestRejected: the point is recorded as unparseable",
    "llm.openai:ServerUnreachable": "a RetriesExhausted: the task adapters stop the run",
    "serve.local:LocalServerError": "raised only by the launchers that tests and benchmarks use "
    "to start a real local service or redis-server; no CLI path reaches it",
    "serve.local:NoTmpfsError": "a LocalServerError: the tests' and benchmarks' full-disk set-up",
    "serve.store:StoreUnavailableError": "a store fault, not the client's: serve answers 503 "
    "with Retry-After and applies nothing",
    "tom.records:_Invalid": "private: gathers one record's field problems, turned into one "
    "ToMRecordError per record",
}


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def exception_classes() -> dict[str, tuple[str, list[str]]]:
    """name -> (module:name, base names) for every class defined anywhere under src/polylogue."""
    classes: dict[str, tuple[str, list[str]]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b for b in map(_base_name, node.bases) if b]
                assert node.name not in classes, f"two classes named {node.name}"
                classes[node.name] = (f"{module}:{node.name}", bases)
    return classes


def _is_builtin_exception(name: str) -> bool:
    obj = getattr(builtins, name, None)
    return isinstance(obj, type) and issubclass(obj, BaseException)


def _is_builtin_warning(name: str) -> bool:
    obj = getattr(builtins, name, None)
    return isinstance(obj, type) and issubclass(obj, Warning)


def _ancestors(name: str, classes: dict[str, tuple[str, list[str]]]) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for base in classes.get(todo.pop(), ("", []))[1]:
            if base not in seen:
                seen.add(base)
                todo.append(base)
    return seen


def test_every_exception_derives_from_an_error_kind_or_is_internal() -> None:
    classes = exception_classes()
    exceptions = {
        name: where
        for name, (where, _) in classes.items()
        if name not in BASES
        and any(map(_is_builtin_exception, _ancestors(name, classes)))
        and not any(map(_is_builtin_warning, _ancestors(name, classes)))
    }
    # The scan really finds the package's exceptions (a broken scan must not pass vacuously).
    assert {"StoreError", "MediaError", "PromptError", "AccessError", "ChunkFailed"} <= set(
        exceptions
    )
    stray = sorted(
        where
        for name, where in exceptions.items()
        if not (_ancestors(name, classes) & BASES) and where not in INTERNAL
    )
    assert not stray, f"derive these from PolylogueInputError or RunStopped, or list them: {stray}"
    internal_but_based = sorted(
        where
        for name, where in exceptions.items()
        if where in INTERNAL and _ancestors(name, classes) & BASES
    )
    assert not internal_but_based, f"no longer internal, drop from INTERNAL: {internal_but_based}"
    missing = sorted(set(INTERNAL) - set(exceptions.values()))
    assert not missing, f"INTERNAL lists classes that no longer exist: {missing}"


def test_former_stray_errors_reach_the_cli_handler() -> None:
    from polylogue.annotate.app import AccessError
    from polylogue.errors import RunStopped, user_errors
    from polylogue.tom.backends import TransientGenerationError
    from polylogue.tom.media import MediaError
    from polylogue.tom.prompts import PromptError

    for cls in (AccessError, MediaError, PromptError):
        assert issubclass(cls, user_errors())
    assert issubclass(MediaError, RuntimeError)  # callers that caught RuntimeError still do
    assert issubclass(TransientGenerationError, RunStopped)


def test_bad_prompt_variant_is_one_line_exit_2(tmp_path: Path) -> None:
    """A PromptError used to escape as a traceback (exit 1); now the one handler reports it."""
    from typer.testing import CliRunner

    from polylogue.cli import app

    res = CliRunner().invoke(
        app,
        ["tom", "run", "--model", "majority", "--variant", "bogus+utter", "--out", str(tmp_path)],
    )
    assert res.exit_code == 2, res.output
    assert "unknown variant token 'bogus'" in res.output and "Traceback" not in res.output
    assert not any(tmp_path.iterdir())  # nothing started
