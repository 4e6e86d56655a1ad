"""No module-level import cycle among gpudoctor's modules.

The graph is read from the source with :mod:`ast`, not by importing: an edge
A -> B for every ``import``/``from ... import`` of a gpudoctor module that runs
when A is imported (module level, including ``if``/``try``/``with`` blocks and
class bodies). Imports inside functions run later and are left out, as are
those under ``if TYPE_CHECKING:`` (they never run). ``from P import name``
is an edge to the submodule ``P.name`` when that is a module, else to ``P``.
The import of a parent package that Python performs implicitly is not an
edge (a package ``__init__`` that imports its submodules, which import each
other, is not a cycle).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import gpudoctor

PACKAGE_DIR = Path(gpudoctor.__file__).parent


def discover(package_dir: Path, package: str) -> dict[str, Path]:
    """{dotted module name: source file} for every module of the package."""
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).with_suffix("")
        parts = [package, *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level_imports(body: list[ast.stmt]):
    """Import statements that run when the module is imported."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.With, ast.For, ast.While, ast.ClassDef)):
            yield from _module_level_imports(node.body)
            yield from _module_level_imports(getattr(node, "orelse", []))


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of ``modules``."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """{module: modules it imports at module level} (see the module docstring)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _module_level_imports(tree.body):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = module.split(".") if is_package else module.split(".")[:-1]
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != module:
                    graph[module].add(resolved)
                elif resolved == module:
                    graph[module].add(module)  # a module importing itself is a cycle too
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with a cycle (Tarjan), each as a sorted list of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(cycle: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(cycle)
    edges = [f"{a} -> {b}" for a in cycle for b in sorted(graph[a]) if b in inside]
    return "; ".join(edges)


def test_no_module_level_import_cycle_in_gpudoctor():
    modules = discover(PACKAGE_DIR, "gpudoctor")
    assert "gpudoctor.cli.common" in modules and "gpudoctor.apply.journal" in modules  # the tree was found
    graph = import_graph(modules)
    cycles = find_cycles(graph)
    assert not cycles, "module-level import cycles: " + " | ".join(_describe(c, graph) for c in cycles)


def test_command_modules_never_import_the_cli_package_that_registers_them():
    modules = discover(PACKAGE_DIR, "gpudoctor")
    graph = import_graph(modules)
    commands = [m for m in modules if m.startswith("gpudoctor.cli.") and m != "gpudoctor.cli.common"]
    assert commands
    for m in commands:
        assert "gpudoctor.cli" not in graph[m], f"{m} imports gpudoctor.cli (import from gpudoctor.cli.common)"
    assert not any(m in graph["gpudoctor.cli.common"] for m in commands)


def _write_package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for rel, text in files.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return pkg


def test_detector_finds_module_level_cycles_and_ignores_deferred_imports(tmp_path):
    pkg = _write_package(
        tmp_path,
        {
            "__init__.py": "from pkg import a\n",
            "a.py": "from pkg.b import thing\n",
            "b.py": "import pkg.c\nthing = 1\n",
            "c.py": "from . import a\n",  # relative: pkg.a -> pkg.b -> pkg.c -> pkg.a
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import e\n",
            "e.py": "def f():\n    from pkg import d\n",  # inside a function: no edge
            "sub/__init__.py": "from .x import y\n",
            "sub/x.py": "try:\n    from ..sub import z\nexcept ImportError:\n    pass\ny = 1\n",
            "sub/z.py": "from pkg.sub import x\n",  # pkg.sub.x <-> pkg.sub.z through a try block
        },
    )
    modules = discover(pkg, "pkg")
    graph = import_graph(modules)
    assert graph["pkg.c"] == {"pkg.a"}
    assert graph["pkg.d"] == set() and graph["pkg.e"] == set()
    assert graph["pkg.sub.x"] == {"pkg.sub.z"}
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"], ["pkg.sub.x", "pkg.sub.z"]]


def test_the_probe_reports_every_library_family_the_loader_collector_knows():
    """The probe runs standalone in the target (stdlib only), so it keeps its own copy of the
    library prefixes; the doctor's loader collector must not know a family the probe drops."""
    from gpudoctor.collect.loader import CUDA_LIB_PREFIXES
    from gpudoctor.probe import _script

    assert set(CUDA_LIB_PREFIXES) <= set(_script.MAPPED_PREFIXES)


def _check_modules() -> set[str]:
    """The check modules: every public module of ``gpudoctor.checks`` (private ``_x`` ones are domain helpers)."""
    names = discover(PACKAGE_DIR, "gpudoctor")
    return {m for m in names if m.startswith("gpudoctor.checks.") and not m.rsplit(".", 1)[1].startswith("_")}


def test_no_check_module_imports_another_check_module():
    """Checks run once (issue 23): shared reasoning lives in domain modules (``gpudoctor.checks._x``
    or outside ``checks/``), never in another check that would be evaluated twice. Every import counts,
    those inside functions too."""
    checks = _check_modules()
    assert "gpudoctor.checks.cuda_available" in checks and "gpudoctor.checks._common" not in checks
    offences = []
    for module in sorted(checks):
        path = discover(PACKAGE_DIR, "gpudoctor")[module]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            offences += [f"{module} imports {t}" for t in targets if t in checks and t != module]
    assert offences == []


def test_the_import_walk_sees_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "checks"
    pkg.mkdir()
    (pkg / "a.py").write_text("def f():\n    from gpudoctor.checks import cuda_devices\n")
    tree = ast.parse((pkg / "a.py").read_text())
    found = [
        f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module for a in n.names
    ]
    assert found == ["gpudoctor.checks.cuda_devices"] and found[0] in _check_modules()
