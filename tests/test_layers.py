"""The package's layering, checked on every import statement it holds (those inside functions too).

Floors, lowest first (docs/architecture.md draws them): a module may import its own package and what the
table below allows, nothing else. An upward or sideways import is how a layout decays, so it fails here,
naming the file, the line and the rule. Within a unit, modules may import each other, but never round in a
circle (test_no_module_import_cycles), and floor 0 never reaches a kind above it through the registry.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "toolpath"

FLOOR0 = {"spec", "state", "coords", "registry", "observations", "deadline", "redact", "spec_reading", "graph_spec",
          "spec_media", "spec_molecules", "spec_secrets", "progress", "paths", "quiet", "pydoc_text", "kinds",
          "loaded_once", "arith_questions", "number_words"}
# What each unit may import besides itself. Floor 0 modules import only each other.
ALLOWED: dict[str, set[str]] = {name: set(FLOOR0) for name in FLOOR0}
ALLOWED["runs"] = set(FLOOR0)
ALLOWED["policies"] = set(FLOOR0)
ALLOWED["sandboxes"] = FLOOR0 | {"runs"}
# Weight compression loads its source model through the policies and is reached only by the CLI (and by
# hf.py through the registry, for the folders it writes).
ALLOWED["compress"] = FLOOR0 | {"policies"}
ALLOWED["tools"] = ALLOWED["sandboxes"] | {"sandboxes"}
ALLOWED["planners"] = ALLOWED["tools"] | {"tools", "policies"}
ALLOWED["baselines"] = ALLOWED["planners"]
ALLOWED["agents"] = ALLOWED["planners"] | {"planners", "baselines"}
ALLOWED["evals"] = ALLOWED["agents"] | {"agents"}
# Training sits on the evals floor: the tiny VLM learns from the eval suites' generated scenes.
ALLOWED["train"] = ALLOWED["evals"] | {"evals"}
ALLOWED["viewer"] = ALLOWED["evals"] | {"evals"}
# Curation sits beside evals: it reads the store, loads proxy models through the policies, embeds with the search
# tools' MiniLM and reads JSON lines as the benchmarks do; only the CLI imports it.
ALLOWED["curate"] = ALLOWED["evals"] | {"evals"}
# The servers are entry points like the CLI: `toolpath serve` (models behind an OpenAI-compatible API) and
# `toolpath mcp serve` (tools over MCP); only the CLI starts them.
ALLOWED["serve"] = ALLOWED["viewer"] | {"viewer", "compress"}
ALLOWED["mcp"] = ALLOWED["viewer"] | {"viewer"}
ALLOWED["cli"] = ALLOWED["viewer"] | {"viewer", "compress", "train", "serve", "mcp", "curate"}
ALLOWED["__main__"] = {"cli"}
ALLOWED["__init__"] = set()

MAX_LINES = 600


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A file's syntax tree, read once per test session: every check below walks every file."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def unit_of(module: str) -> str:
    """'toolpath.tools.image.ops' -> 'tools'; 'toolpath' -> '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path = PACKAGE.parent) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imported(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, module) for every import of the package in the file, resolved to absolute names."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "toolpath"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "toolpath":
                continue
            if target == "toolpath":  # `from toolpath import registry`: the names are modules
                out += [(node.lineno, f"toolpath.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def imported_names(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) for every `from <package module> import names` in the file."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] == "toolpath":
                out.append((node.lineno, target, [a.name for a in node.names]))
    return out


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_unit_has_a_floor():
    units = {unit_of(module_name(p)) for p in SOURCES}
    assert units <= set(ALLOWED), f"modules outside the layer table: {sorted(units - set(ALLOWED))}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_imports_flow_downward(path: Path):
    unit = unit_of(module_name(path))
    wrong = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} ({unit} may import "
             f"{', '.join(sorted(ALLOWED[unit])) or 'nothing of ours'})"
             for line, target in imported(path)
             if unit_of(target) != unit and unit_of(target) not in ALLOWED.get(unit, set())
             and target != "toolpath"]
    assert not wrong, "\n".join(wrong)


@functools.cache
def _exists(module: str, root: Path = PACKAGE.parent) -> bool:
    path = root.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_every_import_names_a_module_that_exists(path: Path):
    """An import inside a function runs only when the function does; a module that moved leaves it pointing
    nowhere until then, so it is checked here."""
    missing = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}, which does not exist"
               for line, target in imported(path) if not _exists(target)]
    assert not missing, "\n".join(missing)


def _defined(module: str, root: Path = PACKAGE.parent) -> set[str]:
    """The names a module binds at its top level (also under if/try), and its submodules' names."""
    path = root.joinpath(*module.split("."))
    source = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
    names = {p.stem for p in path.glob("*.py")} | {p.parent.name for p in path.glob("*/__init__.py")}
    body = list(ast.parse(source.read_text(encoding="utf-8")).body)
    while body:
        node = body.pop()
        if isinstance(node, (ast.If, ast.Try)):
            body += node.body + node.orelse + [x for h in getattr(node, "handlers", []) for x in h.body]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {x.id for x in ast.walk(target) if isinstance(x, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_every_imported_name_is_defined(path: Path):
    wrong = []
    for line, target, names in imported_names(path):
        if _exists(target):
            wrong += [f"{path.relative_to(PACKAGE.parent)}:{line} imports {n} from {target}, which has no such name"
                      for n in sorted(set(names) - _defined(target) - {"*"})]
    assert not wrong, "\n".join(wrong)


def test_no_module_is_too_long():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in SOURCES
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_package_names_no_machine_paths_or_development_issues():
    import re

    pattern = re.compile(r"/work/|/tmp/toolpath-ci|\bissue \d+\b|\bsession\b.*\bissue\b", re.I)
    hits = [f"{p.relative_to(PACKAGE.parent)}:{n}: {line.strip()[:100]}" for p in SOURCES
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not hits, "\n".join(hits)


def test_the_checker_sees_imports_inside_functions(tmp_path: Path):
    src = tmp_path / "toolpath" / "tools" / "probe.py"
    src.parent.mkdir(parents=True)
    src.write_text("def f():\n    from ..policies import base\n", encoding="utf-8")
    assert imported(src, tmp_path) == [(2, "toolpath.policies")]
    assert unit_of("toolpath.policies") not in ALLOWED["tools"]


# ---- cycles between modules ------------------------------------------------------------------------------

def module_edges(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, module) for every module of the package this file imports, wherever the statement stands (at
    the top, inside a function, under `if TYPE_CHECKING`). `from pkg import name` names pkg.name when that is
    a submodule, else pkg (its __init__)."""
    tree = parsed(path)
    out = [(node.lineno, a.name) for node in ast.walk(tree) if isinstance(node, ast.Import)
           for a in node.names if a.name.split(".")[0] == "toolpath"]
    for line, target, names in imported_names(path, root):
        out += [(line, f"{target}.{name}" if _exists(f"{target}.{name}", root) else target) for name in names]
    return out


def import_cycles(sources: list[Path], root: Path = PACKAGE.parent) -> list[list[tuple[str, str, str]]]:
    """Every knot of modules that import each other round in a circle (a strongly connected component of the
    import graph of more than one module), each as its edges inside the knot: (importer, imported, file:line).

    An import inside a function, or one only for type checking, counts like one at the top: Python tolerates
    the circle at run time because the import is deferred, but each side still needs the other to be
    understood, changed or tested, which is what the rule is about. Importing pkg.sub also runs pkg's
    __init__; that implicit step is not an edge (a package's __init__ that imports its own submodules is
    the usual way a package is put together, not a knot)."""
    graph: dict[str, dict[str, str]] = defaultdict(dict)
    for path in sources:
        name = module_name(path, root)
        for line, target in module_edges(path, root):
            if target != name:
                graph[name].setdefault(target, f"{path.relative_to(root)}:{line}")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    knots = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the package's import depth is far below the recursion limit
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.add(w)
                if w == v:
                    break
            if len(members) > 1:
                knots.append(sorted((a, b, where) for a in members for b, where in graph[a].items() if b in members))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return knots


# Cycles being removed: each entry goes once its knot is cut (an entry tolerates that knot, nothing else).
KNOWN_CYCLES: list[set[str]] = []


def _modules_of(knot: list[tuple[str, str, str]]) -> set[str]:
    return {a for a, _, _ in knot} | {b for _, b, _ in knot}


def _describe(knot: list[tuple[str, str, str]]) -> str:
    return "cycle " + ", ".join(f"{a} -> {b} ({where})" for a, b, where in knot)


def test_no_module_import_cycles():
    knots = [k for k in import_cycles(SOURCES) if not any(_modules_of(k) <= known for known in KNOWN_CYCLES)]
    assert not knots, "modules that import each other round in a circle (cut one edge: move what both need " \
                      "into a module of its own):\n" + "\n".join(_describe(k) for k in knots)


def probe_package(root: Path, files: dict[str, str]) -> Path:
    """A package toolpath/tools/probe under root holding `files` (name -> source); its folder."""
    pkg = root / "toolpath" / "tools" / "probe"
    pkg.mkdir(parents=True)
    for name, source in files.items():
        (pkg / name).write_text(source, encoding="utf-8")
    return pkg


def test_the_checker_sees_cycles_through_functions_and_type_checking(tmp_path: Path):
    probe_package(tmp_path, {
        "__init__.py": "from . import a\n", "a.py": "from .b import thing\n",
        "b.py": "def thing():\n    from . import c\n",
        "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n",
        "d.py": "import toolpath.tools.probe.a\n"})
    knots = import_cycles(sorted(tmp_path.rglob("*.py")), tmp_path)
    assert [sorted(_modules_of(k)) for k in knots] == [["toolpath.tools.probe.a", "toolpath.tools.probe.b",
                                                         "toolpath.tools.probe.c"]]
    assert "toolpath/tools/probe/b.py:2" in _describe(knots[0])


# ---- floor 0 and the registry ----------------------------------------------------------------------------

def registry_loads(path: Path) -> list[int]:
    """The lines of a module that call registry.load (or a `load` imported from the registry)."""
    tree = parsed(path)
    local = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and (node.module or "").rpartition(".")[2] == "registry" for a in node.names if a.name == "load"}
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Attribute) and node.func.attr == "load"
         and isinstance(node.func.value, ast.Name) and node.func.value.id == "registry")
        or (isinstance(node.func, ast.Name) and node.func.id in local))]


FLOOR0_SOURCES = [p for p in SOURCES if unit_of(module_name(p)) in FLOOR0 and p.stem != "registry"]


@pytest.mark.xfail(any(registry_loads(p) for p in FLOOR0_SOURCES if p.stem == "spec"), strict=True,
                   reason="spec.py still validates model-side kinds through registry.load (being removed)")
def test_floor0_reaches_no_kind_through_the_registry():
    """The registry's targets live on floors above; a floor-0 module that loads one imports upward through a
    string, which the import check cannot see. Floor 0 may list what is declared, never load it."""
    calls = [f"{p.relative_to(PACKAGE.parent)}:{line}" for p in FLOOR0_SOURCES for line in registry_loads(p)]
    assert not calls, "floor-0 modules loading a registered kind: " + ", ".join(calls)


def test_the_registry_check_sees_both_spellings(tmp_path: Path):
    probe = tmp_path / "probe.py"
    probe.write_text("from . import registry\nfrom .registry import load as get\n"
                     "def f():\n    registry.load('kv_cache', 'kivi')\n    get('decoder', 'vcd')\n"
                     "    registry.declared('x')\n", encoding="utf-8")
    assert sorted(registry_loads(probe)) == [4, 5]


# ---- private names ---------------------------------------------------------------------------------------

# Private names still imported across packages, being given public names by the modules' owners.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def private_imports(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) for each import of a module's private names (one leading underscore) from a module
    outside the importer's own package (its folder)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for line, target, names in imported_names(path, root):
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        home = target if (root / Path(*target.split("."))).is_dir() else target.rpartition(".")[0]
        if private and home != package:
            out.append((line, target, private))
    return out


def test_no_private_name_is_imported_from_another_package():
    """An underscore says "this module's own business": its owner may change it without looking further than its
    package. A module elsewhere that imports it is a dependency nobody can see; what two packages share gets a
    public name, in a module both may import."""
    wrong = [f"{p.relative_to(PACKAGE.parent)}:{line} imports {', '.join(names)} from {target}"
             for p in SOURCES for line, target, names in private_imports(p)
             if (module_name(p), target) not in KNOWN_PRIVATE_IMPORTS]
    assert not wrong, "private names imported from another package:\n" + "\n".join(wrong)


def test_the_private_name_check_allows_the_own_package(tmp_path: Path):
    pkg = probe_package(tmp_path, {"__init__.py": "from ._impl import _helper\n", "_impl.py": "def _helper(): ...\n",
                                   "user.py": "from . import _helper\nfrom ._impl import _helper as h\n"})
    other = tmp_path / "toolpath" / "tools" / "other.py"
    other.write_text("from .probe._impl import _helper, public\n", encoding="utf-8")
    for path in (pkg / "__init__.py", pkg / "user.py"):
        assert private_imports(path, tmp_path) == []
    assert private_imports(other, tmp_path) == [(1, "toolpath.tools.probe._impl", ["_helper"])]
