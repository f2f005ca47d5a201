"""Opening a file runs no code: no module of kvlab calls a deserializer that can execute what a
file holds (pickle and friends, eval/exec, unsafe YAML, torch.load, np.load with pickles).
docs/explanation/trace-format.md ("Opening a file someone else made") states it; this keeps it
true."""

from __future__ import annotations

import ast
from pathlib import Path

KVLAB = Path(__file__).resolve().parents[2] / "kvlab"
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle",
                     "joblib"}  # fmt: skip
LOADERS = {"load", "loads", "Unpickler", "open"}  # NOTE: pickle.dumps (kvlab.core's hashing) is fine
FORBIDDEN_CALLS = {"eval", "exec", "__import__"}


def _offences(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "") in FORBIDDEN_MODULES:
            out += [f"imports {node.module}.{a.name}" for a in node.names if a.name in LOADERS]
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        kwargs = {k.arg: k.value for k in node.keywords}
        if owner in FORBIDDEN_MODULES and name in LOADERS:
            out.append(f"calls {owner}.{name}")
        if name in FORBIDDEN_CALLS and name != "__import__":
            out.append(f"calls {name}()")
        if name == "__import__" and node.args and not isinstance(node.args[0], ast.Constant):
            out.append("calls __import__ with a computed name")
        if owner == "yaml" and name in ("load", "load_all", "unsafe_load", "full_load"):
            out.append(f"calls yaml.{name}")
        if owner == "torch" and name == "load":
            out.append("calls torch.load")
        allow = kwargs.get("allow_pickle")
        if name in ("load", "write_array", "read_array") and isinstance(allow, ast.Constant) \
                and allow.value is True:  # fmt: skip
            out.append(f"calls {name}(allow_pickle=True)")
        if owner in ("np", "numpy") and name in ("load", "loads"):
            out.append(f"calls np.{name} (pickles unless told otherwise; use parse_npy)")
    return out


def test_no_reader_can_execute_what_a_file_holds() -> None:
    found = []
    for path in sorted(KVLAB.rglob("*.py")):
        for offence in _offences(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(KVLAB.parent)}: {offence}")
    assert found == []


def test_the_scan_sees_each_kind_of_offence() -> None:
    bad = ("pickle.loads(b)\nfrom marshal import loads\neval('1')\nexec('x=1')\nyaml.load(f)\n"
           "torch.load(p)\nnp.load(p)\nnp.lib.format.read_array(f, allow_pickle=True)\n"
           "__import__(name)\n")  # fmt: skip
    assert _offences(ast.parse("import pickle\npickle.dumps(x)\n")) == []
    assert sorted(_offences(ast.parse(bad))) == sorted([
        "calls pickle.loads", "imports marshal.loads", "calls eval()", "calls exec()", "calls yaml.load",
        "calls torch.load", "calls np.load (pickles unless told otherwise; use parse_npy)",
        "calls read_array(allow_pickle=True)", "calls __import__ with a computed name",
    ])  # fmt: skip
