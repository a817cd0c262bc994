"""Import rules read from the source: layers only point down, no circles, nothing imports the CLI,
the two rooms of ``training/`` stay apart (their old paths only re-export them).

Every ``import``/``from ... import`` counts, including those inside functions (lazy imports are a
speed trick, not a licence to point upwards). See docs/architecture.md for the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "polylogue"

#: Lower number = lower layer; a module may import its own layer or any lower one.
LAYERS: dict[str, int] = {
    "errors": 0,
    "extras": 0,
    "jsonio": 0,
    "paths": 0,
    "registry": 0,
    "runs": 0,
    "conversation": 1,
    "rendering": 1,
    "llm": 1,
    "corpora": 2,
    "turntaking": 3,
    "prompts": 4,
    "engine": 4,
    "tom": 5,
    "models": 5,
    "evaluation": 6,
    "addressing": 6,
    "serve": 6,
    "adapters": 7,
    "training": 7,
    "annotate": 8,
    "cli": 9,
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported polylogue module) for every import in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("polylogue"):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative import: resolve against the importing package
                base = (package or module_name(path)).split(".")
                mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
            if mod.startswith("polylogue"):
                yield node.lineno, mod


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "polylogue"


def all_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py"))


def test_every_top_level_module_has_a_layer() -> None:
    names = {
        p.stem if p.is_file() else p.name
        for p in SRC.iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
    }
    assert names - set(LAYERS) == set(), "add new top-level modules to LAYERS (and the docs)"


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down(path: Path) -> None:
    here = layer(module_name(path))
    if here == "polylogue":  # the package root re-exports nothing heavy
        return
    bad = [
        f"{path.relative_to(SRC)}:{line} imports {mod} ({layer(mod)} is above {here})"
        for line, mod in imports(path)
        if layer(mod) in LAYERS and LAYERS[layer(mod)] > LAYERS[here]
    ]
    assert bad == []


def test_nothing_imports_the_cli_and_models_never_import_evaluation() -> None:
    bad = []
    for path in all_modules():
        here = layer(module_name(path))
        for line, mod in imports(path):
            if layer(mod) == "cli" and here != "cli":
                bad.append(f"{path.relative_to(SRC)}:{line} imports the CLI ({mod})")
            if here == "models" and layer(mod) == "evaluation":
                bad.append(f"{path.relative_to(SRC)}:{line}: a model imports {mod}")
            if here == "llm" and layer(mod) not in ("llm", "errors"):
                bad.append(f"{path.relative_to(SRC)}:{line}: the LLM layer imports {mod}")
    assert bad == []


def test_the_runtime_never_reads_a_corpus() -> None:
    """``engine/`` runs at decision time: corpus readers (and what is built from them, such as
    the barge-in overlaps) belong to ``training/``, benchmarks and tests."""
    bad = [
        f"{path.relative_to(SRC)}:{line} imports {mod}"
        for path in all_modules()
        if layer(module_name(path)) == "engine"
        for line, mod in imports(path)
        if layer(mod) == "corpora"
    ]
    assert bad == []


#: The two sub-packages of ``training/`` (docs/architecture.md): the paper's LoRA path and the
#: trainers of the engine's CPU models.
TRAINING_ROOMS = ("polylogue.training.lora", "polylogue.training.engine_models")


def training_room(module: str) -> str | None:
    return next((r for r in TRAINING_ROOMS if module == r or module.startswith(r + ".")), None)


def test_the_training_rooms_never_import_each_other_nor_the_old_paths() -> None:
    bad = []
    for path in all_modules():
        name = module_name(path)
        if layer(name) == "training" and training_room(name) is None:
            continue  # training/__init__
        here = training_room(name)
        for line, mod in imports(path):
            if layer(mod) != "training" or mod == "polylogue.training":
                continue
            there = training_room(mod)
            if there is None:
                bad.append(f"{path.relative_to(SRC)}:{line} imports the old path {mod}")
            elif here is not None and there != here:
                bad.append(f"{path.relative_to(SRC)}:{line} imports {mod} (outside {here})")
    assert bad == []


def test_training_holds_only_its_two_rooms() -> None:
    """``training/`` is its ``__init__`` and the two sub-packages: no module sits beside them
    (the package has never been released, so no old import path is kept alive)."""
    loose = sorted(p.name for p in (SRC / "training").glob("*.py") if p.stem != "__init__")
    rooms = sorted(p.name for p in (SRC / "training").iterdir() if (p / "__init__.py").is_file())
    assert loose == []
    assert rooms == sorted(r.rsplit(".", 1)[1] for r in TRAINING_ROOMS)


def test_no_import_circles_between_modules() -> None:
    graph: dict[str, set[str]] = {}
    for path in all_modules():
        name = module_name(path)
        targets = set()
        for _, mod in imports(path):
            # "from polylogue.x import y" may name a module or an attribute: keep what exists.
            targets.add(mod)
        graph[name] = targets
    known = set(graph)
    graph = {k: {t for t in v if t in known and t != k} for k, v in graph.items()}
    # Package __init__ files re-export their submodules; an edge into a package's own
    # submodule from its __init__ is not a circle of meaning.
    for k in graph:
        graph[k] = {t for t in graph[k] if not (t.startswith(k + ".") and k.count(".") >= 1)}
    cycles = _cycles(graph)
    assert cycles == [], f"import circles: {cycles}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out
