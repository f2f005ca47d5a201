"""The normaliser behind ``side_by_side.py``: a function's statement sequence, body lines, hooks.

Pure ``ast``/``tokenize`` code (no vLLM, no kvlab import), so it is unit-tested in normal CI
(tests/benchmarks/test_side_by_side.py). The definitions are in ``side_by_side.py``'s docstring;
in short:

* ``function_steps`` walks a function body into a flat list of ``Step``s (one per statement, plus
  ``Else``/``Except``/``Finally``/``End...`` markers for nested blocks), docstrings dropped, and on
  kvlab's side (``hooks=True``) the recorder lines and the guard call dropped.
* ``compare`` walks two step lists in step and names the first statement that differs, in the
  loose form (statement kinds, assignment targets, called name of a call statement) or the strict
  form (also every called name and every bound local name inside each statement).
* ``FunctionSource`` counts body lines and finds NOTE comments with ``tokenize``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

RECORDER_NAME = re.compile(r"(^|_)rec$|recorder$")
GUARD_NAME = re.compile(r"^_*guards?(_|$)")  # guard, _guard, guards, guard_x; not guarded
# Fields of a compound statement that hold nested statements (walked as blocks, not expressions).
_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


@dataclass(frozen=True)
class Step:
    """One statement (or block marker) of a normalised body.

    ``loose`` is the statement's kind with assignment targets or a call statement's called name
    (``"Assign blocks"``, ``"Call free_blocks"``, ``"If"``, ``"EndFor"``); ``strict`` adds every
    called name and every bound local name inside the statement's own expressions, in order.
    """

    loose: str
    strict: tuple
    lineno: int
    text: str


@dataclass
class Comparison:
    """``compare``'s result: equal or not, the first difference, the vLLM asserts skipped."""

    equal: bool
    first_diff: str = ""
    asserts_dropped: int = 0


def dotted(node: ast.AST) -> str:
    """``self.block_pool.touch`` for attributes, ``x[]`` for a subscript, else ``<expr>``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Subscript):
        return f"{dotted(node.value)}[]"
    if isinstance(node, ast.Starred):
        return f"*{dotted(node.value)}"
    if isinstance(node, (ast.Tuple, ast.List)):
        return "(" + ", ".join(dotted(e) for e in node.elts) + ")"
    if isinstance(node, ast.Call):
        return f"{dotted(node.func)}()"
    return "<expr>"


def call_name(func: ast.AST) -> str:
    """The name a call is known by: ``touch`` for ``self.block_pool.touch(...)``."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return "<expr>"


def _terminal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


def _is_recorder_ref(node: ast.AST) -> bool:
    name = _terminal(node)
    return name is not None and bool(RECORDER_NAME.search(name))


def _recorder_test(test: ast.expr) -> bool:
    """``X is not None``, ``X`` or ``X is not None and ...`` with X recorder-named."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return _recorder_test(test.values[0])
    if (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.IsNot)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None):
        test = test.left
    if isinstance(test, ast.NamedExpr):  # if (rec := self.recorder) is not None:
        return _is_recorder_ref(test.target) and _is_recorder_ref(test.value)
    return _is_recorder_ref(test)


def _is_recorder_call(stmt: ast.stmt) -> bool:
    """A call statement on a recorder's method (``rec.touch(...)``, ``self.recorder.x.y(...)``)
    or one that passes a recorder on (``self.set_recorder(recorder)``)."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    if any(_is_recorder_ref(a) for a in [*call.args, *(k.value for k in call.keywords)]):
        return True
    receiver = call.func
    if not isinstance(receiver, ast.Attribute):
        return False
    receiver = receiver.value
    while isinstance(receiver, ast.Attribute) and not _is_recorder_ref(receiver):
        receiver = receiver.value
    return _is_recorder_ref(receiver)


def is_recorder_line(stmt: ast.stmt) -> bool:
    """``rec = ...``/``self.recorder = ...``, or an ``if <recorder> is not None:`` calling it."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return _is_recorder_ref(stmt.targets[0])
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return _is_recorder_ref(stmt.target)
    if isinstance(stmt, ast.If) and not stmt.orelse and _recorder_test(stmt.test):
        return all(_is_recorder_call(s) for s in stmt.body)
    return False


def guard_prefixes(tree: ast.Module) -> set[str]:
    """Dotted names bound by imports from a module whose name contains ``guards``.

    ``from kvlab.core.guards import check_free`` gives ``check_free``; ``from kvlab.core import
    kv_cache_guards as g`` gives ``g``; ``import kvlab.core.guards`` gives ``kvlab.core.guards``.
    """
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            from_guards = any("guards" in part for part in (node.module or "").split("."))
            for alias in node.names:
                if from_guards or "guards" in alias.name:
                    found.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any("guards" in part for part in alias.name.split(".")):
                    found.add(alias.asname or alias.name)
    return found


def _names(target: ast.AST) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        parts = [_names(e) for e in target.elts]
        return None if None in parts else [n for p in parts for n in p]
    return None


def is_guard_call(stmt: ast.stmt, prefixes: set[str] = frozenset(),
                  params: frozenset[str] = frozenset()) -> bool:
    """The guard line: a call to ``guard_*``/``_guard*``, to a method of one (``self.guard.x``) or
    to a name from a ``*guards*`` module, as a bare call or assigned to parameters only
    (``blocks = guard(blocks)`` rebinds the arguments it checked, e.g. an iterable made a list).

    ``prefixes``: what ``guard_prefixes`` found in the function's module; ``params``: the
    function's parameter names.
    """
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
        names = [_names(t) for t in stmt.targets]
        if None in names or not all(set(n) <= params for n in names):
            return False
    elif not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    text = dotted(stmt.value.func)
    if any(GUARD_NAME.match(part) for part in text.split(".")):
        return True  # guard_x(...), self._guard_x(...), self.guard.x(...)
    return any(text == p or text.startswith(p + ".") for p in prefixes)


def _own_nodes(stmt: ast.AST):
    """The statement's own expression nodes in source order (nested statement blocks excluded)."""
    stack: list[ast.AST] = []
    for name, value in reversed(list(ast.iter_fields(stmt))):
        if name in _BLOCK_FIELDS:
            continue
        items = value if isinstance(value, list) else [value]
        stack.extend(v for v in reversed(items) if isinstance(v, ast.AST))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _strict(loose: str, stmt: ast.AST, extra_names: tuple = ()) -> tuple:
    calls, names = [], list(extra_names)
    for node in _own_nodes(stmt):
        if isinstance(node, ast.Call):
            calls.append(call_name(node.func))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.alias):
            names.append(node.asname or node.name.split(".")[0])
    return (loose, tuple(calls), tuple(names))


def _loose(stmt: ast.stmt) -> str:
    kind = type(stmt).__name__
    if isinstance(stmt, ast.Assign):
        return "Assign " + " = ".join(dotted(t) for t in stmt.targets)
    if isinstance(stmt, ast.AugAssign):
        return f"AugAssign {dotted(stmt.target)} {type(stmt.op).__name__}"
    if isinstance(stmt, ast.AnnAssign):
        # An annotation is not a statement of its own: `x: int = 0` reads as `x = 0`.
        return f"{'Assign' if stmt.value is not None else 'Declare'} {dotted(stmt.target)}"
    if isinstance(stmt, ast.Expr):
        value = stmt.value
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call):
            return f"Call {call_name(value.func)}"
        return f"Expr {type(value).__name__}"
    if isinstance(stmt, ast.Delete):
        return "Delete " + ", ".join(dotted(t) for t in stmt.targets)
    if isinstance(stmt, (ast.Global, ast.Nonlocal)):
        return f"{kind} {', '.join(stmt.names)}"
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return "Import " + ", ".join(a.asname or a.name for a in stmt.names)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"Def {stmt.name}"
    if isinstance(stmt, ast.ClassDef):
        return f"Class {stmt.name}"
    return kind  # Return, Raise, Assert, Pass, Break, Continue, If, For, While, With, Try, Match


@dataclass
class _Walk:
    lines: list[str]
    hooks: bool
    steps: list[Step] = field(default_factory=list)
    stripped: list[tuple[int, int]] = field(default_factory=list)
    docstrings: list[tuple[int, int]] = field(default_factory=list)

    def text(self, lineno: int) -> str:
        return self.lines[lineno - 1].strip() if 0 < lineno <= len(self.lines) else ""

    def add(self, loose: str, node: ast.AST, lineno: int, extra_names: tuple = ()) -> None:
        self.steps.append(Step(loose, _strict(loose, node, extra_names), lineno, self.text(lineno)))

    def marker(self, loose: str, lineno: int, text: str) -> None:
        self.steps.append(Step(loose, (loose, (), ()), lineno, text))

    def block(self, body: list[ast.stmt], *, docstring: bool = False) -> None:
        for i, stmt in enumerate(body):
            if docstring and i == 0 and is_docstring(stmt):
                self.docstrings.append((stmt.lineno, stmt.end_lineno))
                continue
            if self.hooks and is_recorder_line(stmt):
                self.stripped.append((stmt.lineno, stmt.end_lineno))
                continue
            if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(
                    stmt.value, ast.Constant) and stmt.value.value is Ellipsis):
                continue  # no-ops: a body of `pass` or `...` equals a docstring-only body
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        loose = _loose(stmt)
        self.add(loose, stmt, stmt.lineno)
        end = f"End{loose.split()[0]}"
        closing = f"(end of `{self.text(stmt.lineno)}`)"
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.block(stmt.body, docstring=True)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            self.block(stmt.body)
            for handler in stmt.handlers:
                kind = "Except " + (dotted(handler.type) if handler.type is not None else "")
                names = (handler.name,) if handler.name else ()
                self.add(kind.strip(), handler, handler.lineno, names)
                self.block(handler.body)
            self._tail("Else", stmt.orelse, stmt.lineno)
            self._tail("Finally", stmt.finalbody, stmt.lineno)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                self.marker("Case", case.pattern.lineno, self.text(case.pattern.lineno))
                self.block(case.body)
        elif hasattr(stmt, "body"):  # If, For, While, With (and their async forms)
            self.block(stmt.body)
            self._tail("Else", getattr(stmt, "orelse", []), stmt.lineno)
        else:
            return
        self.marker(end, stmt.end_lineno, closing)

    def _tail(self, label: str, body: list[ast.stmt], start: int) -> None:
        if body:
            line = body[0].lineno  # an `elif` has no `else:` line: its own line is shown
            while line > start and not self.text(line).startswith(label.lower()):
                line -= 1
            if line == start:
                line = body[0].lineno
            self.marker(label, line, self.text(line))
            self.block(body)


@dataclass
class Normalised:
    """A function's steps, and the line spans its docstrings and stripped hooks occupy."""

    steps: list[Step]
    stripped: list[tuple[int, int]]
    docstrings: list[tuple[int, int]]
    guard: str = ""


def function_steps(func: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str], *,
                   hooks: bool = False, guards: set[str] = frozenset()) -> Normalised:
    """Normalise ``func``'s body; ``hooks=True`` (kvlab's side) drops recorder lines and the guard.

    ``lines`` is the source file's lines (for the statement texts in reports); ``guards`` the
    dotted names ``guard_prefixes`` found in the function's module.
    """
    walk = _Walk(lines, hooks)
    body = list(func.body)
    if body and is_docstring(body[0]):
        walk.docstrings.append((body[0].lineno, body[0].end_lineno))
        body = body[1:]
    guard = ""
    args = func.args
    params = frozenset(a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                       args.vararg, args.kwarg) if a is not None)
    if hooks and body and is_guard_call(body[0], guards, params):
        walk.stripped.append((body[0].lineno, body[0].end_lineno))
        guard = dotted(body[0].value.func)
        body = body[1:]
    walk.block(body)
    return Normalised(walk.steps, walk.stripped, walk.docstrings, guard)


def _describe(step: Step | None, side: str) -> str:
    if step is None:
        return f"{side}: (nothing)"
    text = step.text if len(step.text) <= 70 else step.text[:67] + "..."
    return f"{side} L{step.lineno} `{text}`"


def compare(vllm: list[Step], kvlab: list[Step], *, strict: bool = False,
            drop_asserts: bool = False) -> Comparison:
    """Walk both step lists together; stop at the first step that differs.

    ``drop_asserts``: a vLLM ``assert`` with no equal statement at that place in kvlab is skipped
    (kvlab moved it into its guard; the caller allows this only when kvlab's body says so in a
    NOTE that names the guard).
    """
    key = (lambda s: s.strict) if strict else (lambda s: s.loose)
    i = j = dropped = 0
    while i < len(vllm) or j < len(kvlab):
        v = vllm[i] if i < len(vllm) else None
        k = kvlab[j] if j < len(kvlab) else None
        if v is not None and k is not None and key(v) == key(k):
            i, j = i + 1, j + 1
            continue
        if v is not None and drop_asserts and v.loose == "Assert":
            i, dropped = i + 1, dropped + 1
            continue
        if k is None:
            how = "kvlab lacks " + _describe(v, "vLLM")
        elif v is None:
            how = "kvlab adds " + _describe(k, "kvlab")
        elif i + 1 < len(vllm) and key(vllm[i + 1]) == key(k):
            how = "kvlab lacks " + _describe(v, "vLLM")
        elif j + 1 < len(kvlab) and key(kvlab[j + 1]) == key(v):
            how = "kvlab adds " + _describe(k, "kvlab")
        else:
            how = f"{_describe(v, 'vLLM')} vs {_describe(k, 'kvlab')}"
        return Comparison(False, how, dropped)
    return Comparison(True, "", dropped)


class FunctionSource:
    """One source file's significant lines and comments, for body-line counts and NOTEs."""

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()
        self.significant: set[int] = set()
        self.comments: dict[int, str] = {}
        skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                self.comments[tok.start[0]] = tok.string
            elif tok.type not in skip:
                self.significant.update(range(tok.start[0], tok.end[0] + 1))

    def body_lines(self, func: ast.AST, norm: Normalised) -> int:
        """Lines of ``func``'s body holding code: no blank, comment-only or docstring lines,
        none of the stripped hook lines."""
        first = func.body[0].lineno
        excluded: set[int] = set()
        for start, end in norm.docstrings + norm.stripped:
            excluded.update(range(start, end + 1))
        lines = {n for n in range(first, func.end_lineno + 1) if n in self.significant}
        return len(lines - excluded)

    def notes(self, func: ast.AST) -> list[str]:
        """NOTE comments from the ``def`` line to the function's last line, in order.

        A NOTE runs on over the comment-only lines right below it (until a line with code, a
        blank line or the next NOTE); each is returned as one string.
        """
        found: list[str] = []
        current: list[str] | None = None
        for n in range(func.lineno, func.end_lineno + 1):
            comment = self.comments.get(n)
            own_line = comment is not None and self.lines[n - 1].lstrip().startswith("#")
            if comment is not None and "NOTE" in comment:
                current = [comment.lstrip("#").strip()]
                found.append("")
            elif current is not None and own_line:
                current.append(comment.lstrip("#").strip())
            else:
                current = None
            if current is not None:
                found[-1] = " ".join(current)
        return found
