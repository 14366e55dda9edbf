"""The package's layout and the imports allowed between its parts.

Every module is read with ``ast`` (nothing is imported, so no side effects)
and each import of a ``spacy_rhetoric`` module, at module level or inside a
function, becomes an edge between *parts*: a subpackage
(``spacy_rhetoric.analysis``) or a root module (``spacy_rhetoric.errors``).
The rules:

- the product never imports the studies: no module outside
  ``spacy_rhetoric.research`` imports it, except the command line, which
  exposes the studies' commands and imports them only inside those commands
  (so ``rhetoric --help`` and a core install never load them);
- no circle between parts, nor between modules;
- the package root holds exactly the parts listed in ``ROOT``, so a new
  loose module is a decision made here, not an accident;
- ``packaging`` (building pipeline folders) is imported only by the command
  line.

The root ``__init__`` is the public facade (``doc_to_record``,
``parallelisms``): every submodule import runs it, so it is left out of the
circle check, but it is held to the research rule like any module.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterable, List, Set, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "spacy_rhetoric"
NAME = PACKAGE.name

#: What ``ls spacy_rhetoric`` shows: subpackages, then root modules.
ROOT = {
    "subpackages": {
        "analysis": "rhetoric analyze: driver, input/output, engines, pieces, record, HTML",
        "assets": "builders of pretrained assets (encoders, vectors, generator model)",
        "cli": "the rhetoric command line",
        "components": "spaCy factories and their pipes",
        "corpora": "corpus converters and the training reader",
        "evaluation": "the evaluation users rerun (raw path, linker, speed)",
        "llm": "the generator side: backends, prompts, verifier, rerankers",
        "ml": "thinc/torch architectures and layers (CRF, tagging, encoders)",
        "prompts": "prompt templates (data, no modules)",
        "research": "studies behind the published figures (research extra)",
        "runtime": "process settings: threads, BLAS ops, msgpack codecs",
        "scorers": "registered scorers",
        "serve": "rhetoric serve: REST API and the page for teachers",
        "tokenizer": "the Chinese tokenizer and its pkuseg speed-ups",
    },
    "modules": {
        "__init__.py": "the public facade",
        "__main__.py": "python -m spacy_rhetoric",
        "annotation.py": "sentence-level annotation read off a Doc",
        "errors.py": "the error catalogue",
        "extensions.py": "Span._ extensions",
        "packaging.py": "assembles trained components into a pipeline folder",
        "spangroups.py": "parallelisms as span groups",
        "taxonomy.py": "the label taxonomy",
    },
}

PRODUCT_FREE_OF = f"{NAME}.research"
#: May import research, but only inside functions (the commands that run it).
LAZY_IMPORTERS = (f"{NAME}.cli",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> Dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _top_level(tree: ast.AST) -> Iterable[ast.AST]:
    """The nodes of ``tree`` outside any function body (what importing runs)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))


def imported(name: str, path: Path, known: Iterable[str], top_level: bool = False) -> Set[str]:
    """The package's modules that the module ``name`` imports anywhere in it
    (with ``top_level``: outside function bodies only). ``from pkg import
    mod`` counts as importing ``pkg.mod`` (and ``pkg``'s ``__init__`` only
    when a name imported is not a module)."""
    known = set(known)
    found: Set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf8"))
    for node in _top_level(tree) if top_level else ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                sub = f"{prefix}.{alias.name}"
                found.add(sub if sub in known else prefix)
    return {t for t in found if t in known and t != name}


def part_of(module: str) -> str:
    """``spacy_rhetoric.analysis.records`` -> ``spacy_rhetoric.analysis``;
    a root module is its own part; the root ``__init__`` is ``spacy_rhetoric``."""
    parts = module.split(".")
    return ".".join(parts[:2])


def module_graph(top_level: bool = False) -> Dict[str, Set[str]]:
    mods = modules()
    return {name: imported(name, path, mods, top_level) for name, path in mods.items()}


def part_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    parts: Dict[str, Set[str]] = {}
    for src, targets in graph.items():
        if src == NAME:
            continue
        edges = parts.setdefault(part_of(src), set())
        edges.update(part_of(t) for t in targets if t != NAME and part_of(t) != part_of(src))
    return parts


def find_circle(graph: Dict[str, Set[str]]) -> List[str]:
    state: Dict[str, int] = {}
    stack: List[str] = []

    def visit(node: str) -> List[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def research_imports(graph: Dict[str, Set[str]], top_level: Dict[str, Set[str]]) -> List[Tuple[str, str]]:
    """``(importer, research module)`` pairs that break the rule: any import
    of research outside it, but for a lazy importer only one that runs when
    the importer is imported."""
    bad = []
    for src, targets in graph.items():
        if _within(src, PRODUCT_FREE_OF):
            continue
        lazy = any(_within(src, p) for p in LAZY_IMPORTERS)
        for t in (top_level[src] if lazy else targets):
            if _within(t, PRODUCT_FREE_OF):
                bad.append((src, t))
    return sorted(bad)


def test_nothing_outside_research_imports_research():
    assert research_imports(module_graph(), module_graph(top_level=True)) == []


def test_no_circle_between_subpackages():
    assert find_circle(part_graph(module_graph())) == []


def test_no_circle_between_modules():
    """A module may import down or sideways, never back up a path that leads
    to itself (at module level or inside a function)."""
    graph = module_graph()
    assert f"{NAME}.analysis.records" in graph[f"{NAME}.analysis.driver"]
    circle = find_circle(graph)
    assert not circle, " -> ".join(circle)


def test_package_root_holds_exactly_the_listed_parts():
    entries = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__" and not p.name.startswith(".")}
    subpackages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert subpackages == set(ROOT["subpackages"])
    assert entries - subpackages == set(ROOT["modules"])


def test_only_the_command_line_assembles_pipelines():
    """``packaging`` builds and edits pipeline folders; running a pipeline
    loads it with ``analysis.loading``, so nothing else needs packaging."""
    importers = {src for src, targets in module_graph().items() if f"{NAME}.packaging" in targets}
    assert importers and all(_within(src, f"{NAME}.cli") for src in importers), sorted(importers)


def test_every_listed_subpackage_with_code_is_a_package():
    for name in ROOT["subpackages"]:
        folder = PACKAGE / name
        if any(folder.glob("*.py")):
            assert (folder / "__init__.py").is_file(), name


@pytest.mark.parametrize(
    "graph,expected",
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_find_circle_reports_the_circle(graph, expected):
    assert find_circle(graph) == expected


def test_rules_catch_a_product_module_importing_research():
    graph, top = module_graph(), module_graph(top_level=True)
    graph[f"{NAME}.analysis.driver"] = graph[f"{NAME}.analysis.driver"] | {f"{NAME}.research.cmc"}
    assert research_imports(graph, top) == [(f"{NAME}.analysis.driver", f"{NAME}.research.cmc")]


def test_rules_catch_the_command_line_importing_research_when_loaded():
    graph, top = module_graph(), module_graph(top_level=True)
    top[f"{NAME}.cli.evaluate"] = top[f"{NAME}.cli.evaluate"] | {f"{NAME}.research.cmc"}
    assert research_imports(graph, top) == [(f"{NAME}.cli.evaluate", f"{NAME}.research.cmc")]


def test_top_level_reading_skips_function_bodies(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import a\n\ndef f():\n    import b\n", encoding="utf8")
    assert imported("m", module, {"a", "b"}, top_level=True) == {"a"}
    assert imported("m", module, {"a", "b"}) == {"a", "b"}


def test_rules_catch_a_circle_between_subpackages():
    graph = module_graph()
    graph[f"{NAME}.ml.crf"] = graph[f"{NAME}.ml.crf"] | {f"{NAME}.analysis.records"}
    graph[f"{NAME}.analysis.records"] = graph[f"{NAME}.analysis.records"] | {f"{NAME}.ml.crf"}
    assert find_circle(part_graph(graph))
