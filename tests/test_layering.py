"""The house's layering, read from the source: no module imports another package's private
(underscore) module or name, and no two packages import each other.

A *package* here is each direct child of kvlab/ (a subpackage such as kvlab.core or
kvlab.sglang, or a top-level module such as kvlab.cli or kvlab.i18n) plus kvlab's own
``__init__``; kvlab.core counts as one package whatever its internal files (only imports across
packages are checked for cycles). Every import counts, also those inside functions, and
``__import__("kvlab.x")`` / ``importlib.import_module("kvlab.x")`` with a literal name.

A private module or name belongs to the package that holds it: ``kvlab.trace._x`` and a name
``_y`` defined in ``kvlab/trace/anything.py`` are kvlab.trace's, usable inside kvlab.trace only;
``kvlab._version`` belongs to kvlab itself, so every kvlab module may use it. Dunder names
(``__version__``) and gettext's ``_`` are public.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def find_modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under root/kvlab."""
    out = {}
    for path in sorted((root / "kvlab").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def unit_of(module: str) -> str:
    """The package a module belongs to (see the module docstring)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name != "_"


def imports_of(module: str, modules: dict[str, Path]) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every kvlab import of a module."""
    path = modules[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, str | None, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name.startswith("kvlab")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if not base.startswith("kvlab"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                hit = (sub, None) if sub in modules else (base, a.name)
                out.append((*hit, node.lineno))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0].value
            if name in ("__import__", "import_module") and isinstance(arg, str) \
                    and arg.startswith("kvlab"):  # fmt: skip
                out.append((arg, None, node.lineno))
    return out


def private_violations(modules: dict[str, Path]) -> list[str]:
    """Imports of a private module or name from outside the package that owns it."""

    def inside(module: str, owner: str) -> bool:
        return module == owner or module.startswith(owner + ".")

    bad = []
    for module in modules:
        for target, name, line in sorted(imports_of(module, modules), key=lambda t: t[2]):
            parts = target.split(".")
            for i, part in enumerate(parts):
                if _is_private(part) and not inside(module, ".".join(parts[:i])):
                    bad.append(f"{module}:{line} imports private module {target}")
            if name is not None and _is_private(name):
                path = modules.get(target)
                owner = target if path is None or path.name == "__init__.py" else \
                    target.rpartition(".")[0]  # fmt: skip
                if not inside(module, owner):
                    bad.append(f"{module}:{line} imports private name {name} from {target}")
    return bad


def package_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Package -> the other packages its modules import."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module in modules:
        for target, _, _ in imports_of(module, modules):
            if unit_of(target) != unit_of(module):
                graph[unit_of(module)].add(unit_of(target))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
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
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return found


MODULES = find_modules(ROOT)
GRAPH = package_graph(MODULES)


def test_no_module_imports_another_packages_private_module_or_name() -> None:
    assert private_violations(MODULES) == []


def test_no_two_packages_import_each_other() -> None:
    mutual = sorted({tuple(sorted((a, b))) for a, bs in GRAPH.items() for b in bs
                     if a in GRAPH.get(b, ())})  # fmt: skip
    assert mutual == []
    assert cycles(GRAPH) == []


def test_the_mirrored_systems_sit_below_the_comparison() -> None:
    systems = ("kvlab.core", "kvlab.nanovllm", "kvlab.sglang", "kvlab.kv_events")
    assert set(systems) <= GRAPH["kvlab.compare"]
    for system in systems:
        assert "kvlab.compare" not in GRAPH.get(system, set()), system
        assert "kvlab.traffic" not in GRAPH.get(system, set()), system
    assert GRAPH.get("kvlab.core", set()) <= {"kvlab._version"}  # imports no other package


def test_the_checks_catch_what_they_forbid(tmp_path: Path) -> None:
    files = {
        "kvlab/__init__.py": "from kvlab._version import v\n",
        "kvlab/_version.py": "v = 1\n",
        "kvlab/i18n.py": "def _(s):\n    return s\n",
        "kvlab/a/__init__.py": "",
        "kvlab/a/_impl.py": "X = 1\n",
        "kvlab/a/inner.py": "from kvlab.a._impl import X\n_hidden = 2\nfrom kvlab.i18n import _\n",
        "kvlab/b/__init__.py": "from . import user\n",
        "kvlab/b/user.py": ("from kvlab.a.inner import _hidden\n"
                            "def f():\n    import kvlab.a._impl\n"
                            "from kvlab._version import v\n"
                            "from ..a import _impl\n"),
        "kvlab/c/__init__.py": "from kvlab.d import y\n",
        "kvlab/d/__init__.py": "y = 1\ndef g():\n    __import__('kvlab.c')\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules = find_modules(tmp_path)
    assert private_violations(modules) == [
        "kvlab.b.user:1 imports private name _hidden from kvlab.a.inner",
        "kvlab.b.user:3 imports private module kvlab.a._impl",
        "kvlab.b.user:5 imports private module kvlab.a._impl",
    ]
    graph = package_graph(modules)
    assert graph["kvlab.b"] == {"kvlab.a", "kvlab._version"}
    assert cycles(graph) == [["kvlab.c", "kvlab.d"]]
