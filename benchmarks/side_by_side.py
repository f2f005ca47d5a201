"""Side by side: each function of vLLM 0.22.1's KV-cache core next to kvlab's, lines and statements.

Run where vLLM 0.22.1 is installed (the oracle environment); only vLLM's source files are read,
nothing of vLLM is imported::

    PYTHONPATH=$PWD /work/ovenv/bin/python benchmarks/side_by_side.py          # markdown
    PYTHONPATH=$PWD /work/ovenv/bin/python benchmarks/side_by_side.py --json   # every field
    PYTHONPATH=$PWD /work/ovenv/bin/python benchmarks/side_by_side.py --check  # exit 1 on "no"

``--vllm DIR`` (vLLM's ``v1/core``; default: found in the installed ``vllm`` package) and
``--kvlab DIR`` (the package that mirrors it; default: this repository's ``kvlab/core``) may point
anywhere, e.g. at another checkout. The table is for docs/explanation/fidelity.md ("Reading kvlab
next to vLLM"). Exit status 0 for the report; ``--check`` exits 1 when a function neither matches
nor has a NOTE.

Definitions (the normaliser is ``side_by_side_ast.py``, the name resolution
``side_by_side_resolve.py``; both are tested in tests/benchmarks/test_side_by_side.py):

* Mirrored functions: every function and method defined in vLLM's kv_cache_manager.py,
  kv_cache_coordinator.py, single_type_kv_cache_manager.py, block_pool.py, kv_cache_utils.py and
  sched/scheduler.py (nested classes' methods included; a nested function is part of the function
  that holds it; ``@overload`` stubs skipped; a property setter is ``X.name.setter``) for which
  kvlab's module of the same path (``kvlab/core/sched/scheduler.py`` ...) resolves the same
  qualified name to a function. Resolution is static and follows what a reader follows: a
  module-level name through ``from ... import`` re-exports (relative and ``*`` imports included)
  and ``a = b`` aliases, a method through the class body, then its bases, depth first. Every other
  vLLM function is "not mirrored", with the sentence of kvlab's module (or class) docstring that
  names it as the reason, when there is one.
* Body lines: the lines from the body's first statement to the function's last line that hold
  code: no blank line, no comment-only line, no line of a docstring (the function's or a nested
  def's or class's).
* Hook lines (kvlab's side only; the whole statement leaves both the line count and the sequence).
  Recorder lines: an assignment to one recorder name (a name or attribute ending in ``recorder``,
  or ``rec`` / ending in ``_rec``: ``rec = self.recorder``, ``self.recorder = None``); and
  ``if X is not None:`` / ``if X:`` / ``if X is not None and ...:`` /
  ``if (rec := self.recorder) is not None:`` with X a recorder name, no ``else``, and a body of
  call statements that call a recorder's method or pass a recorder on (``rec.touch(...)``,
  ``self.recorder.pool.x(...)``, ``self.set_recorder(recorder)``; they run only when recording).
  The guard line: the body's first statement (after the docstring) when it calls a name starting
  ``guard``/``_guard`` or a method of such a name (``guard_allocate_slots(...)``,
  ``self._guard_free(...)``, ``self.guard.schedule()``), or a name bound by an import from a
  module whose dotted name has a part containing ``guards``, as a
  bare call or assigned to the function's own parameters only (``blocks = guard_touch(self,
  blocks)``: the guard hands back the arguments it checked). ``check_*`` names are not guards:
  vLLM's own bodies call ``check_*`` functions.
* Statement sequence: every statement in source order, recursing into nested blocks, docstrings,
  ``pass``, ``...`` and hook lines left out. Loose form: the statement's kind; ``Assign`` and
  ``AugAssign`` with their targets (``self.x[]`` for a subscript; ``x: T = v`` is ``Assign x``),
  ``Call <name>`` for a call statement (the called name's last part), ``Def <name>`` for a nested
  def. Compound statements add ``Else``/``Except <type>``/``Finally``/``Case`` markers and an
  ``End<kind>`` marker, so a statement moved into or out of a loop is a difference. Strict form:
  the loose form plus, per statement, every called name and every bound local name (loop,
  ``with``, walrus, comprehension and ``except`` targets), in source order.
* Match: both sequences are walked together; the first step that differs is reported with its
  line and source ("kvlab lacks vLLM L412 ...", "kvlab adds kvlab L88 ...", or both). A vLLM
  ``assert`` that kvlab does not have at that place is skipped when kvlab's body has a NOTE
  comment naming the guard (the comment contains ``NOTE`` and ``guard``): kvlab's guard raises a
  clear error instead. The table says how many asserts were skipped.
* Status: ``yes`` when the loose sequences match; ``NOTE`` when they do not and kvlab's body has
  a NOTE comment that names vLLM or kvlab (``# NOTE: vLLM ...; kvlab ...``: a NOTE explaining the
  deliberate difference; a NOTE about an invariant does not count; a NOTE runs on over the
  comment lines below it); ``no`` otherwise. ``--check --strict`` also fails a function whose
  strict form differs without such a NOTE.
* Files to open: the files a reader opens to read kvlab's function: the module of vLLM's name,
  every file the resolution passes through (a package's ``__init__`` only when it re-exports the
  name), the file that defines the function, and the files defining the kvlab-only helpers it
  calls, transitively. A helper is a called kvlab function or class whose called name vLLM does
  not have (not defined or imported in the six files, nor defined in the vLLM modules they import
  from); bare names and module attributes are resolved through the imports, ``self.``/``cls.``
  methods through the class. Hook lines are not followed, nor the exception a ``raise`` builds.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib.metadata
import importlib.util
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from side_by_side_ast import FunctionSource, compare, function_steps, guard_prefixes
from side_by_side_resolve import KvlabTree, is_overload, setter_role
from side_by_side_report import markdown

REPO = Path(__file__).resolve().parent.parent
VLLM_FILES = ("kv_cache_manager.py", "kv_cache_coordinator.py", "single_type_kv_cache_manager.py",
              "block_pool.py", "kv_cache_utils.py", "sched/scheduler.py")


@dataclass
class Row:
    """One mirrored function: vLLM's and kvlab's sides, and how they compare."""

    name: str
    vllm_file: str
    vllm_line: int
    vllm_lines: int
    kvlab_file: str
    kvlab_line: int
    kvlab_lines: int
    hook_lines: int
    files: list[str]
    helpers: list[str]
    status: str
    first_diff: str
    strict: bool
    strict_diff: str
    asserts_in_guard: int
    guard: str
    notes: list[str] = field(default_factory=list)


@dataclass
class Missing:
    """A vLLM function kvlab does not mirror, and why (kvlab's docstring's words, when it says)."""

    name: str
    vllm_file: str
    reason: str


def vllm_core_dir() -> Path:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("side_by_side: vLLM is not importable here; run it with the oracle "
                         "environment's python, or pass --vllm DIR (vLLM's v1/core)")
    return Path(list(spec.submodule_search_locations)[0]) / "v1" / "core"


def _type_checking_block(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and "TYPE_CHECKING" in ast.unparse(stmt.test)


def vllm_functions(tree: ast.Module):
    """(qualified name, its parts, role, node) of every function and method of a vLLM module.

    In source order; ``role`` is ``setter``/``deleter`` for a property's setter or deleter (its
    qualified name ends in ``.setter``), else ``""``.
    """
    def visit(body, prefix, top):
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_overload(stmt):
                role, parts = setter_role(stmt), [*prefix, stmt.name]
                yield ".".join(parts + ([role] if role else [])), parts, role, stmt
            elif isinstance(stmt, ast.ClassDef):
                yield from visit(stmt.body, [*prefix, stmt.name], False)
            elif top and isinstance(stmt, (ast.If, ast.Try)) and not _type_checking_block(stmt):
                for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])):
                    yield from visit(block, prefix, True)
    yield from visit(tree.body, [], True)


def vllm_names(trees: list[ast.Module]) -> set[str]:
    """Every name vLLM's files define or import (module level, class bodies) and the builtins."""
    names = set(dir(builtins))
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def imported_trees(vllm_dir: Path, trees: list[ast.Module]) -> list[ast.Module]:
    """The vLLM modules ``trees`` import from (``from vllm.v1.request import ...``), parsed."""
    root = vllm_dir.resolve()
    while (root / "__init__.py").exists():
        root = root.parent
    found = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                base = root.joinpath(*node.module.split("."))
                for path in (base.with_name(base.name + ".py"), base / "__init__.py"):
                    if path.is_file() and path not in found:
                        found[path] = ast.parse(path.read_text())
    return list(found.values())


def build(vllm_dir: Path, kvlab_dir: Path, files=VLLM_FILES) -> tuple[list[Row], list[Missing]]:
    """Compare every function of ``files`` (paths under vLLM's v1/core) with kvlab's."""
    sources = {f: (vllm_dir / f).read_text() for f in files}
    trees = {f: ast.parse(text) for f, text in sources.items()}
    known = list(trees.values())
    kvlab = KvlabTree(kvlab_dir, vllm_names(known + imported_trees(vllm_dir, known)))
    rows: list[Row] = []
    missing: list[Missing] = []
    for f in files:
        vsrc = FunctionSource(sources[f])
        for qualname, parts, role, vnode in vllm_functions(trees[f]):
            found = kvlab.find(f, parts, role)
            if isinstance(found, str):
                missing.append(Missing(qualname, f, found))
                continue
            vnorm = function_steps(vnode, vsrc.lines)
            ksrc = found.module.source
            knorm = function_steps(found.node, ksrc.lines, hooks=True,
                                   guards=guard_prefixes(found.module.tree))
            notes = ksrc.notes(found.node)
            drop = any("guard" in n.lower() for n in notes)
            loose = compare(vnorm.steps, knorm.steps, drop_asserts=drop)
            strict = compare(vnorm.steps, knorm.steps, strict=True, drop_asserts=drop)
            explains = [n for n in notes if "vLLM" in n or "kvlab" in n]
            status = "yes" if loose.equal else ("NOTE" if explains else "no")
            files_, helpers = kvlab.files_to_open(found, knorm)
            stripped = sum(e - s + 1 for s, e in knorm.stripped)
            rows.append(Row(
                name=qualname, vllm_file=f, vllm_line=vnode.lineno,
                vllm_lines=vsrc.body_lines(vnode, vnorm),
                kvlab_file=kvlab.rel(found.module.path), kvlab_line=found.node.lineno,
                kvlab_lines=ksrc.body_lines(found.node, knorm), hook_lines=stripped,
                files=files_, helpers=helpers, status=status, first_diff=loose.first_diff,
                strict=strict.equal, strict_diff=strict.first_diff,
                asserts_in_guard=loose.asserts_dropped, guard=knorm.guard,
                notes=explains if status == "NOTE" else []))
    return rows, missing


def failures(rows: list[Row], strict: bool = False) -> list[Row]:
    """Rows that neither match nor carry an explaining NOTE (``strict``: in the strict form too)."""
    return [r for r in rows if r.status == "no" or (strict and not r.strict and r.status != "NOTE")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", type=Path,
                        help="vLLM's v1/core directory (default: the installed vllm's)")
    parser.add_argument("--kvlab", type=Path, default=REPO / "kvlab" / "core",
                        help="the package that mirrors it (default: this repository's kvlab/core)")
    parser.add_argument("--files", nargs="+", default=list(VLLM_FILES),
                        help="vLLM files to compare, relative to --vllm (default: issue 17's six)")
    parser.add_argument("--json", action="store_true", help="print every field as JSON")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if a function neither matches nor has an explaining NOTE")
    parser.add_argument("--strict", action="store_true",
                        help="with --check: the strict form must match too")
    args = parser.parse_args(argv)
    if args.vllm is None:
        vllm_dir, label = vllm_core_dir(), f"vLLM {importlib.metadata.version('vllm')}"
    else:
        vllm_dir, label = args.vllm, f"vLLM's source at {args.vllm}"
    absent = [f for f in args.files if not (vllm_dir / f).is_file()]
    if absent:
        parser.error(f"no {', '.join(absent)} under {vllm_dir} (expected vLLM's v1/core)")
    rows, missing = build(vllm_dir, args.kvlab, tuple(args.files))
    if args.json:
        report = {"vllm": label, "vllm_dir": str(vllm_dir), "kvlab_dir": str(args.kvlab),
                  "mirrored": [asdict(r) for r in rows],
                  "not_mirrored": [asdict(m) for m in missing]}
        print(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        print(markdown(rows, missing, label))
    if args.check:
        bad = failures(rows, args.strict)
        for r in bad:
            why = r.first_diff or r.strict_diff
            print(f"side_by_side: {r.vllm_file}::{r.name}: {why}", file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
