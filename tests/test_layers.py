"""The package's layering, checked on every import statement it holds (those inside functions too).

Floors, lowest first (docs/architecture.md draws them): a module may import its own package and what the
table below allows, nothing else. An upward or sideways import is how a layout decays, so it fails here,
naming the file, the line and the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "toolpath"

FLOOR0 = {"spec", "state", "coords", "registry", "observations", "deadline", "redact", "spec_reading", "graph_spec", "spec_secrets",
          "progress", "paths", "quiet", "pydoc_text", "kinds"}
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
# The servers are entry points like the CLI: `toolpath serve` (models behind an OpenAI-compatible API) and
# `toolpath mcp serve` (tools over MCP); only the CLI starts them.
ALLOWED["serve"] = ALLOWED["viewer"] | {"viewer", "compress"}
ALLOWED["mcp"] = ALLOWED["viewer"] | {"viewer"}
ALLOWED["cli"] = ALLOWED["viewer"] | {"viewer", "compress", "train", "serve", "mcp"}
ALLOWED["__main__"] = {"cli"}
ALLOWED["__init__"] = set()

MAX_LINES = 600


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
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
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
