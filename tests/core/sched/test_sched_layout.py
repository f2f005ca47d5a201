"""kvlab.core.sched's shape: vLLM's file names, no import cycles, no reaching into private state."""

from __future__ import annotations

import ast
from pathlib import Path

import kvlab.core.sched

SCHED = Path(kvlab.core.sched.__file__).parent
FILES = sorted(p for p in SCHED.glob("*.py") if p.name != "__init__.py")


def sched_imports(path: Path) -> set[str]:
    """Modules of kvlab.core.sched that ``path`` imports, TYPE_CHECKING blocks included."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kvlab.core.sched."):
            found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found.update(
                a.name.rsplit(".", 1)[1]
                for a in node.names
                if a.name.startswith("kvlab.core.sched.")
            )
    return found


def test_files_are_vllms_plus_config():
    assert [p.name for p in FILES] == [
        "config.py", "output.py", "request_queue.py", "scheduler.py", "utils.py"
    ]


def test_no_import_cycles():
    graph = {p.stem: sched_imports(p) for p in FILES}
    assert graph["scheduler"] == {"config", "output", "request_queue", "utils"}
    assert graph["output"] == set() and graph["request_queue"] == set()

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n}))
                   for n in graph.get(start, ()))

    cycles = [name for name in graph if reaches(name, name, {name})]
    assert cycles == []


def test_no_private_attribute_of_another_object():
    """``x._name`` only on ``self`` (dunders aside)."""
    offenders = []
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")
            ):
                offenders.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []
