"""The markdown report of ``side_by_side.py``: a summary, the mirrored functions, the rest."""

from __future__ import annotations

LEGEND = (
    "Columns: *vLLM lines* and *kvlab lines* count the body's lines of code (no blank, comment "
    "or docstring line; kvlab's recorder lines and guard call are left out). *Files to open*: "
    "the files a reader opens to read kvlab's function (the module of vLLM's name, the imports "
    "followed to the definition, the kvlab-only helpers it calls). *Same statements*: the "
    "sequence of statements (assignments with their targets, call statements, control flow, in "
    "order) equals vLLM's; NOTE: it differs and a NOTE in the body says why; otherwise the first "
    "statement that differs. *Strict*: every called name and local name also equal. Generated "
    "by `benchmarks/side_by_side.py`."
)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def summary(rows, missing) -> dict:
    """Counts for the report's first lines (and for tests)."""
    return {
        "mirrored": len(rows),
        "yes": sum(r.status == "yes" for r in rows),
        "NOTE": sum(r.status == "NOTE" for r in rows),
        "no": sum(r.status == "no" for r in rows),
        "strict_yes": sum(r.strict for r in rows),
        "not_mirrored": len(missing),
        "vllm_lines": sum(r.vllm_lines for r in rows),
        "kvlab_lines": sum(r.kvlab_lines for r in rows),
        "hook_lines": sum(r.hook_lines for r in rows),
        "one_file": sum(len(r.files) == 1 for r in rows),
    }


def _status(row) -> str:
    if row.status == "yes":
        n = row.asserts_in_guard
        return f"yes ({n} assert(s) in the guard)" if n else "yes"
    return f"{row.status}: {row.first_diff}"


def markdown(rows, missing, vllm_label: str) -> str:
    s = summary(rows, missing)
    out = [
        "## Reading kvlab next to vLLM",
        "",
        f"Side by side with {vllm_label}: {s['mirrored']} mirrored functions: {s['yes']} match "
        f"vLLM's statement sequence, {s['NOTE']} differ with a NOTE, {s['no']} differ without "
        f"one; {s['strict_yes']} also match in the strict form (every call and local name). "
        f"{s['not_mirrored']} vLLM functions are not mirrored.",
        "",
        f"Body lines: vLLM {s['vllm_lines']}, kvlab {s['kvlab_lines']} (plus {s['hook_lines']} "
        f"recorder and guard lines, not counted). {s['one_file']} of {s['mirrored']} functions "
        "read in one file.",
        "",
        LEGEND,
        "",
        "| vLLM function | vLLM file | vLLM lines | kvlab lines | files to open "
        "| same statements as vLLM | strict |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        out.append(f"| `{r.name}` | {r.vllm_file} | {r.vllm_lines} | {r.kvlab_lines} "
                   f"| {len(r.files)} | {_cell(_status(r))} | {'yes' if r.strict else 'no'} |")
    if missing:
        out += ["", "Not mirrored:", "", "| vLLM function | vLLM file | why |", "|---|---|---|"]
        out += [f"| `{m.name}` | {m.vllm_file} | {_cell(m.reason)} |" for m in missing]
    return "\n".join(out)
