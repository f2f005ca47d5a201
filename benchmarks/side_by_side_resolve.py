"""Static name resolution in kvlab's tree for ``side_by_side.py``: where a name is really defined.

A reader who looks for ``KVCacheManager.allocate_slots`` opens ``kvlab/core/kv_cache_manager.py``;
if the name is imported there, they follow the import (``from kvlab.core.x import Name``, relative
and ``*`` imports, ``a = b`` aliases, a package's ``__init__``), and for a method the class body,
then its bases. ``KvlabTree`` does the same with ``ast`` only (nothing is imported) and records
every file on the way. It also finds the kvlab-only helpers a function calls (names vLLM's files
do not have), transitively, with the files that define them.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from side_by_side_ast import FunctionSource, Normalised, dotted

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
MAX_HELPER_DEPTH = 4


def is_overload(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any(dotted(d) in ("overload", "typing.overload") for d in decorators)


def setter_role(node: ast.AST) -> str:
    """``setter``/``deleter`` for ``@name.setter``-decorated defs, else ``""``."""
    for d in getattr(node, "decorator_list", []):
        if isinstance(d, ast.Attribute) and d.attr in ("setter", "deleter"):
            return d.attr
    return ""


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    source: FunctionSource
    defs: dict = field(default_factory=dict)
    imports: dict = field(default_factory=dict)  # local name -> (module, attribute or None)
    aliases: dict = field(default_factory=dict)  # local name -> expression it is bound to
    stars: list = field(default_factory=list)


@dataclass
class Ref:
    """What a name resolved to (``def``/``class``/``module``/``other``), the files on the way."""

    kind: str
    module: Module
    node: ast.AST | None
    files: list[Path]
    owner: ast.ClassDef | None = None  # the class whose body holds ``node`` (a method)

    def via(self, files: list[Path]) -> Ref:
        merged = list(dict.fromkeys([*files, *self.files]))
        return Ref(self.kind, self.module, self.node, merged, self.owner)


@dataclass
class Found:
    """kvlab's counterpart of a vLLM function: where it is, and the class ``self`` refers to."""

    module: Module
    node: ast.FunctionDef
    files: list[Path]
    cls: Ref | None


def _index(module: Module, package: str) -> None:
    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(body):
        for stmt in body:
            if (isinstance(stmt, (*FUNCS, ast.ClassDef)) and not is_overload(stmt)
                    and not setter_role(stmt)):
                module.defs[stmt.name] = stmt
            elif isinstance(stmt, ast.ImportFrom):
                source = absolute(stmt)
                for alias in stmt.names:
                    if alias.name == "*":
                        module.stars.append(source)
                    else:
                        module.imports[alias.asname or alias.name] = (source, alias.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    local = alias.asname or alias.name.split(".")[0]
                    module.imports[local] = (alias.name if alias.asname else local, None)
            elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)):
                module.aliases[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, (ast.If, ast.Try)):
                for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", [])):
                    visit(block)
    visit(module.tree.body)


class KvlabTree:
    """kvlab's mirror package (``kvlab/core``) and the tree above it, read statically."""

    def __init__(self, core_dir: Path, vllm_names: set[str]) -> None:
        self.core_dir = core_dir.resolve()
        parts, up = [self.core_dir.name], self.core_dir.parent
        while (up / "__init__.py").exists():
            parts.insert(0, up.name)
            up = up.parent
        self.root, self.package, self.top = up, ".".join(parts), parts[0]
        self.vllm_names = vllm_names
        self._modules: dict[str, Module | None] = {}

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def module(self, name: str) -> Module | None:
        if name.split(".")[0] != self.top:
            return None
        if name not in self._modules:
            base = self.root.joinpath(*name.split("."))
            self._modules[name] = None
            candidates = ((base.with_name(base.name + ".py"), False), (base / "__init__.py", True))
            for path, is_pkg in candidates:
                if path.is_file():
                    text = path.read_text()
                    mod = Module(name, path, ast.parse(text), FunctionSource(text))
                    _index(mod, name if is_pkg else name.rpartition(".")[0])
                    self._modules[name] = mod
                    break
        return self._modules[name]

    def resolve(self, modname: str, name: str, seen: frozenset = frozenset()) -> Ref | None:
        """Follow ``name`` from module ``modname`` to its definition (None: not in kvlab's tree)."""
        mod = self.module(modname)
        if mod is None or (modname, name) in seen:
            return None
        seen = seen | {(modname, name)}
        here = [mod.path]
        if name in mod.defs:
            node = mod.defs[name]
            return Ref("class" if isinstance(node, ast.ClassDef) else "def", mod, node, here)
        if name in mod.aliases:
            ref = self.resolve_expr(mod, mod.aliases[name], seen)
            return ref.via(here) if ref else Ref("other", mod, None, here)
        if name in mod.imports:
            source, attr = mod.imports[name]
            if attr is None:
                target = self.module(source)
                return Ref("module", target, None, here) if target else None
            ref = self.resolve(source, attr, seen)
            if ref is None and self.module(f"{source}.{attr}") is not None:
                ref = Ref("module", self.module(f"{source}.{attr}"), None, [])
            return ref.via(here) if ref else None
        for star in mod.stars:
            ref = self.resolve(star, name, seen)
            if ref is not None:
                return ref.via(here)
        # A package's submodule: the reader opens the submodule's file, not the __init__.
        sub = self.module(f"{modname}.{name}") if mod.path.name == "__init__.py" else None
        return Ref("module", sub, None, []) if sub else None

    def resolve_expr(self, mod: Module, expr: ast.AST, seen: frozenset = frozenset()) -> Ref | None:
        if isinstance(expr, ast.Name):
            return self.resolve(mod.name, expr.id, seen)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr(mod, expr.value, seen)
            if base is None:
                return None
            if base.kind == "module":
                ref = self.resolve(base.module.name, expr.attr, seen)
                return ref.via(base.files) if ref else None
            if base.kind == "class":
                return self.member(base, expr.attr)
        return None

    def member(self, cls: Ref, name: str, role: str = "",
               seen: frozenset = frozenset()) -> Ref | None:
        """``name`` in class ``cls`` (method, nested class, class attribute), else its bases."""
        key = (cls.module.path, cls.node.lineno, name)
        if key in seen:
            return None
        seen = seen | {key}
        body = cls.node.body
        defs = [s for s in body if isinstance(s, FUNCS) and s.name == name and not is_overload(s)
                and setter_role(s) == role]
        if defs:
            return Ref("def", cls.module, defs[-1], cls.files, cls.node)
        for stmt in body:
            if isinstance(stmt, ast.ClassDef) and stmt.name == name and not role:
                return Ref("class", cls.module, stmt, cls.files, cls.node)
            targets = (stmt.targets if isinstance(stmt, ast.Assign)
                       else [getattr(stmt, "target", None)])
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(
                    isinstance(t, ast.Name) and t.id == name for t in targets):
                value = stmt.value
                if isinstance(value, ast.Name) and value.id != name:
                    ref = (self.member(cls, value.id, role, seen)
                           or self.resolve_expr(cls.module, value))
                    if ref is not None:
                        return ref.via(cls.files)
                return Ref("other", cls.module, stmt, cls.files, cls.node)
        for base in cls.node.bases:
            ref = self.resolve_expr(cls.module, base)
            if ref is not None and ref.kind == "class":
                found = self.member(ref.via(cls.files), name, role, seen)
                if found is not None:
                    return found
        return None

    def find(self, vllm_file: str, parts: list[str], role: str) -> Found | str:
        """kvlab's counterpart of ``parts`` (a qualified name) of ``vllm_file``, or why none."""
        modname = f"{self.package}.{vllm_file[:-3].replace('/', '.')}"
        shown = f"{self.rel(self.core_dir)}/{vllm_file}"
        qualname = ".".join(parts) + (f".{role}" if role else "")
        mod = self.module(modname)
        if mod is None:
            return f"kvlab has no {shown}"
        ref, cls = self.resolve(modname, parts[0]), None
        for i, part in enumerate(parts[1:], start=1):
            if ref is None or ref.kind != "class":
                break
            cls = ref
            ref = self.member(ref, part, role if i == len(parts) - 1 else "")
        docs = [mod.tree] + ([cls.node, cls.module.tree] if cls is not None else [])
        said = docstring_reason(docs, parts, qualname)
        if ref is None or ref.kind != "def":
            if said:
                return said
            if ref is None and cls is not None and parts[-1].startswith("__") and any(
                    "dataclass" in dotted(d) for d in cls.node.decorator_list):
                return f"kvlab's {parts[-2]} is a @dataclass: {parts[-1]} is generated"
            if ref is None:
                return f"no {qualname} in {shown}"
            return f"kvlab's {qualname} is not a function (a {ref.kind})"
        return Found(ref.module, ref.node, ref.files, cls)

    def files_to_open(self, found: Found, norm: Normalised) -> tuple[list[str], list[str]]:
        """The files a reader opens to read ``found`` (see side_by_side.py), and its helpers."""
        files = list(found.files)
        helpers: list[str] = []
        skip = [range(s, e + 1) for s, e in norm.stripped]
        self._follow(found.module, found.node, found.cls, skip, files, helpers, set(), 0)
        return [self.rel(f) for f in files], helpers

    def _follow(self, mod, func, cls, skip, files, helpers, visited, depth) -> None:
        args = func.args
        params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
        params += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
        local = set(params) | {n.id for n in ast.walk(func) if isinstance(n, ast.Name)
                               and isinstance(n.ctx, ast.Store)}
        this = params[0] if cls is not None and params else None
        raised = {id(n.exc) for n in ast.walk(func)
                  if isinstance(n, ast.Raise) and n.exc is not None}
        for node in ast.walk(func):
            if (not isinstance(node, ast.Call) or id(node) in raised
                    or any(node.lineno in r for r in skip)):
                continue  # the exception a `raise` builds is not read to follow the function
            ref, name, owner = None, None, None
            if isinstance(node.func, ast.Name) and node.func.id not in local:
                name = node.func.id
                ref = self.resolve(mod.name, name)
            elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                root, name = node.func.value.id, node.func.attr
                if root == this:
                    ref, owner = self.member(cls, name), cls
                elif root not in local:
                    base = self.resolve(mod.name, root)
                    if base is not None and base.kind == "module":
                        ref = self.resolve(base.module.name, name)
                        ref = ref.via(base.files) if ref else None
                    elif base is not None and base.kind == "class":
                        ref = self.member(base, name)
            if ref is None or name in self.vllm_names or ref.kind not in ("def", "class"):
                continue
            key = (ref.module.path, ref.node.lineno)
            if key in visited:
                continue
            visited.add(key)
            prefix = f"{ref.owner.name}." if ref.owner is not None else ""
            where = f"{self.rel(ref.module.path)}:{ref.node.lineno}"
            helpers.append(f"{prefix}{ref.node.name} ({where})")
            files.extend(p for p in dict.fromkeys(ref.files) if p not in files)
            if ref.kind == "def" and depth < MAX_HELPER_DEPTH:
                self._follow(ref.module, ref.node, owner, [], files, helpers, visited, depth + 1)


def docstring_reason(nodes: list[ast.AST], parts: list[str], qualname: str) -> str:
    """The docstring sentence that names the function.

    Qualified (``Class.method``), or as ````name````, ``name(``, or bare when the name has an
    underscore inside (a plain word such as ``free`` would match ordinary prose).
    """
    name = parts[-1]
    patterns = [re.escape(qualname), rf"``{re.escape(name)}``", rf"\b{re.escape(name)}\("]
    if "_" in name.strip("_"):
        patterns.append(rf"(?<![\w.]){re.escape(name)}\b")
    for node in nodes:
        doc = ast.get_docstring(node) or ""
        sentences = re.split(r"(?<=[.;:])\s+(?=[A-Z`(])|\n\s*\n", doc)
        for pattern in patterns:
            for sentence in sentences:
                if re.search(pattern, sentence):
                    text = " ".join(sentence.split())
                    return text if len(text) <= 200 else text[:197] + "..."
    return ""
