"""Every `kvlab` option's bad value: exit status 2, one clean line naming what was wrong and what
is allowed, no traceback, and nothing done (output paths are checked before the work). Plus the
issue's hanging commands, which must end in seconds with a clear message."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlab.cli import main
from kvlab.cli_hints import install_hint
from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.trace import Recorder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def saved_trace(tmp_path: Path) -> Path:
    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    mgr = KVCacheManager(KVCacheConfig(num_blocks=6, kv_cache_tensors=[],
                                       kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)]),
                         max_model_len=64, hash_block_size=4)
    rec = Recorder().attach(mgr)
    req = Request("r0", list(range(9)), SamplingParams(max_tokens=2), None,
                  block_hasher=get_request_block_hasher(4, sha256))
    blocks, hit = mgr.get_computed_blocks(req)
    mgr.allocate_slots(req, req.num_tokens - hit, hit, blocks)
    path = tmp_path / "one.kvtrace"
    rec.trace().save(path)
    return path


def _clean(out) -> str:
    """The error line; asserts there is no traceback."""
    assert "Traceback" not in out.output, out.output
    assert out.exception is None or isinstance(out.exception, SystemExit), repr(out.exception)
    lines = [ln for ln in out.output.splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, out.output
    return lines[0]


# (args, fragments of the one error line); every option of every command with a bad value.
USAGE_ERRORS = [
    (["demo", "--blocks", "1"], ["'--blocks'", "1 is not in the range x>=2"]),
    (["demo", "--blocks", "abc"], ["'--blocks'", "'abc' is not a valid integer"]),
    (["demo", "--block-size", "0"], ["'--block-size'", "0 is not in the range x>=1"]),
    (["demo", "--max-tokens", "0"], ["'--max-tokens'", "0 is not in the range x>=1"]),
    (["demo", "--max-tokens", "-3"], ["'--max-tokens'", "-3 is not in the range x>=1"]),
    (["demo", "--backend", "cuda-magic"], ["'--backend'", "'auto', 'triton', 'torch'"]),
    (["demo", "--threads", "0"], ["'--threads'", "0 is not in the range 1<=x<=1024"]),
    (["demo", "--blocks", "100000", "--block-size", "64"], ["--blocks", "allowed at most 131,072"]),
    (["generate", "hi", "--blocks", "0"], ["'--blocks'", "0 is not in the range x>=2"]),
    (["generate", "hi", "--block-size", "0"], ["'--block-size'", "0 is not in the range x>=1"]),
    (["generate", "hi", "--max-tokens", "0"], ["'--max-tokens'", "0 is not in the range x>=1"]),
    (["generate", "hi", "--backend", "x"], ["'--backend'", "'auto', 'triton', 'torch'"]),
    (["generate", "hi", "--threads", "-1"], ["'--threads'", "-1 is not in the range"]),
    (["generate", "hi", "--threads", "2.5"], ["'--threads'", "'2.5' is not a valid integer"]),
    (["generate", "hi", "--model", "/no/such/model.gguf"], ["'--model'", "does not exist"]),
    (["generate", "hi", "--save", "/no/such/dir/x.kvtrace"],
     ["--save", "folder /no/such/dir does not exist"]),
    (["generate"], ["Missing argument 'PROMPT'"]),
    (["compare", "--pool-tokens", "0"], ["'--pool-tokens'", "0 is not in the range 1<=x<=16777216"]),
    (["compare", "--pool-tokens", "10000000000000"], ["'--pool-tokens'", "1<=x<=16777216"]),
    (["compare", "--pool-tokens", "8"], ["--pool-tokens", "8 tokens hold no block of --block-size 16: "
                                         "give at least 16"]),
    (["compare", "bogus"], ["WORKLOAD", "unknown workload 'bogus': use one of system-prompt, "
                            "multi-turn, rag, few-shot, a .jsonl file or a saved kvlab trace"]),
    (["compare", "--block-size", "0"], ["'--block-size'", "0 is not in the range x>=1"]),
    (["compare", "--policy", "lru"], ["--policy", "unknown cache 'lru'; allowed: vllm, nano-vllm "
                                      "(alias: nano), radix"]),
    (["compare", "--requests", "0"], ["'--requests'", "0 is not in the range 1<=x<=100000"]),
    (["compare", "--requests", "-5"], ["'--requests'", "-5 is not in the range 1<=x<=100000"]),
    (["compare", "--seed", "x"], ["'--seed'", "'x' is not a valid integer"]),
    (["compare", "--json", "/no/such/dir/x.json"], ["--json", "folder /no/such/dir does not exist"]),
    (["compare", "--svg-dir", "/proc/kvlab-svg"], ["--svg-dir", "cannot create folder /proc/kvlab-svg"]),
    (["figures", "--out", "/proc/kvlab-figures"], ["--out", "cannot create folder"]),
    (["lab", "--port", "0"], ["'--port'", "0 is not in the range 1<=x<=65535"]),
    (["lab", "--port", "70000"], ["'--port'", "70000 is not in the range 1<=x<=65535"]),
    (["trace", "show", "/no/such.kvtrace"], ["'PATH'", "does not exist"]),
    (["trace", "info", "/no/such.kvtrace"], ["'PATH'", "does not exist"]),
    (["trace", "show", "TRACE", "--view", "bogus"], ["'--view'", "'all', 'pool'"]),
    (["trace", "show", "TRACE", "--event", "99"], ["--event", "the trace has", "use 0.."]),
    (["trace", "show", "TRACE", "--event", "x"], ["'--event'", "'x' is not a valid integer"]),
    (["trace", "show", "TRACE", "--request", "req1"],
     ["--request", "no request 'req1' in this trace; it holds: r0"]),
    (["nosuchcommand"], ["No such command 'nosuchcommand'"]),
]


@pytest.mark.parametrize(("args", "fragments"), USAGE_ERRORS,
                         ids=[" ".join(args) for args, _ in USAGE_ERRORS])
def test_bad_option_values_exit_2_with_one_clean_line(args, fragments, saved_trace: Path) -> None:
    args = [str(saved_trace) if a == "TRACE" else a for a in args]
    out = CliRunner().invoke(main, args, terminal_width=200)
    line = _clean(out)
    assert out.exit_code == 2, out.output
    for frag in fragments:
        assert frag in line, (frag, line)


def test_output_paths_that_are_the_wrong_kind(tmp_path: Path) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    runner = CliRunner()
    for args, frag in [
        (["figures", "--out", str(a_file)], "is a file"),
        (["demo", "--out", str(a_file)], "is a file"),
        (["compare", "--svg-dir", str(a_file)], "is a file"),
        (["compare", "--json", str(tmp_path)], "is a directory"),
        (["generate", "hi", "--save", str(tmp_path)], "is a directory"),
        (["figures", "--out", str(a_file / "sub")], "cannot create folder"),
    ]:
        out = runner.invoke(main, args, terminal_width=200)
        line = _clean(out)
        assert out.exit_code == 2 and frag in line, (args, out.output)
    assert a_file.read_text() == "x"


def test_output_paths_are_checked_before_the_work(tmp_path: Path, monkeypatch) -> None:
    import kvlab.compare as compare_pkg
    import kvlab.figures as figures_mod

    def boom(*_a, **_k):
        raise AssertionError("the work started before the output path was checked")

    monkeypatch.setattr(compare_pkg, "cli_compare", boom)
    monkeypatch.setattr(figures_mod, "write_canonical_figures", boom)
    runner = CliRunner()
    missing = tmp_path / "missing" / "x.json"
    for args in (["compare", "--json", str(missing)], ["figures", "--out", "/proc/x/y"]):
        out = runner.invoke(main, args)
        assert out.exit_code == 2, out.output
    assert not missing.parent.exists()


def test_trace_show_on_damaged_traces_is_one_clean_error(saved_trace: Path, monkeypatch) -> None:
    import kvlab.report as report

    for exc in (KeyError("block 7"), ValueError("replay failed at event 3"),
                AttributeError("'list' object has no attribute 'get'")):
        def raise_it(*_a, _exc=exc, **_k):
            raise _exc

        monkeypatch.setattr(report, "print_trace_view", raise_it)
        out = CliRunner().invoke(main, ["trace", "show", str(saved_trace)])
        line = _clean(out)
        assert out.exit_code == 1 and str(saved_trace) in line, out.output


def test_an_unexpected_error_is_one_line_and_kvlab_debug_shows_it(monkeypatch) -> None:
    import kvlab.figures as figures_mod

    def broken(*_a, **_k):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(figures_mod, "write_canonical_figures", broken)
    monkeypatch.delenv("KVLAB_DEBUG", raising=False)
    out = CliRunner().invoke(main, ["figures", "--out", "/tmp"])
    assert out.exit_code == 1
    assert _clean(out) == "Error: division by zero (set KVLAB_DEBUG=1 to see the traceback)"
    monkeypatch.setenv("KVLAB_DEBUG", "1")
    out = CliRunner().invoke(main, ["figures", "--out", "/tmp"])
    assert isinstance(out.exception, ZeroDivisionError)


def test_a_missing_extra_is_named(monkeypatch) -> None:
    import kvlab.figures as figures_mod

    def needs_torch(*_a, **_k):
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    monkeypatch.setattr(figures_mod, "write_canonical_figures", needs_torch)
    monkeypatch.delenv("KVLAB_DEBUG", raising=False)
    out = CliRunner().invoke(main, ["figures", "--out", "/tmp"])
    assert out.exit_code == 1
    assert _clean(out) == ("Error: `kvlab figures` needs torch, which is not installed: "
                           f"{install_hint('model')}")
    assert f"-e '{REPO}[model]'" in out.output or "-e '.[model]'" in out.output  # the checkout


def test_lab_passes_allow_root_and_unknown_options_to_jupyterlab(monkeypatch, tmp_path) -> None:
    import kvlab.lab as lab_mod

    seen = {}

    def fake_launch(notebook_dir, port, extra_args=None):
        seen.update(notebook_dir=notebook_dir, port=port, extra=extra_args)
        return 0

    monkeypatch.setattr(lab_mod, "launch_lab", fake_launch)
    out = CliRunner().invoke(main, ["lab", "--allow-root", "--port", "8899", "--no-browser",
                                    "--ServerApp.ip=0.0.0.0", "--notebooks", str(tmp_path)])
    assert out.exit_code == 0, out.output
    assert seen == {"notebook_dir": tmp_path, "port": 8899,
                    "extra": ["--allow-root", "--no-browser", "--ServerApp.ip=0.0.0.0"]}
    out = CliRunner().invoke(main, ["lab"])
    assert out.exit_code == 0 and seen["extra"] == []


# ------------------------------------------------------------------ the hanging commands
def _run(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kvlab.cli", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1",
                               "COLUMNS": "100"})
    return proc, time.perf_counter() - t0


@pytest.mark.model
def test_generate_on_a_four_block_pool_ends_at_max_model_len(tmp_path: Path) -> None:
    proc, seconds = _run("generate", "Tell me a story", "--blocks", "4", "--max-tokens", "100")
    assert proc.returncode == 0, proc.stderr
    assert "stopped at max_model_len 48" in proc.stdout and "Traceback" not in proc.stderr
    assert seconds < 60


@pytest.mark.model
@pytest.mark.parametrize("blocks", ["2", "6"])
def test_demo_on_a_pool_too_small_refuses_clearly(blocks: str, tmp_path: Path) -> None:
    proc, seconds = _run("demo", "--blocks", blocks, "--out", str(tmp_path / "d"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    err = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert len(err) == 1 and f"--blocks {blocks}" in err[0] and "more than max_model_len" in err[0]
    assert seconds < 60


@pytest.mark.model
def test_a_prompt_that_can_never_fit_exits_2() -> None:
    proc, seconds = _run("generate", "hello " * 1450, "--no-chat")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("the prompt has 1451 tokens; with at least 1 output token that is more than "
            "max_model_len 1008 (allowed 1..1007"
            in " ".join(proc.stderr.split()))
    assert seconds < 60


@pytest.mark.parametrize(("field", "value"), [("checkpoint_interval", -1),
                                              ("checkpoint_interval", "abc"),
                                              ("config", [1, 2]), ("requests", [1, 2, 3])])
def test_damaged_trace_files_are_one_clean_error(saved_trace: Path, tmp_path: Path, field: str,
                                                 value: object) -> None:
    import json
    import zipfile

    bad = tmp_path / "bad.kvtrace"
    with zipfile.ZipFile(saved_trace) as src, zipfile.ZipFile(bad, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == "header.json":
                header = json.loads(data)
                header[field] = value
                data = json.dumps(header).encode()
            dst.writestr(name, data)
    for args in (["trace", "show", str(bad)], ["trace", "info", str(bad)],
                 ["trace", "show", str(bad), "--request", "ghost"]):
        out = CliRunner().invoke(main, args)
        line = _clean(out)
        assert out.exit_code == 1 and f"header field {field}" in line, out.output


def test_compare_svg_dir_without_matplotlib_says_what_to_install(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys\n"
            "class _Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'matplotlib':\n"
            "            raise ModuleNotFoundError('No module named ' + repr(name), name=name)\n"
            "sys.meta_path.insert(0, _Block())\n"
            "from kvlab.cli import main\n"
            f"main(['compare', 'rag', '--svg-dir', {str(tmp_path / 'svg')!r}])\n")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"--svg-dir needs matplotlib (the viz extra): {install_hint('viz')}" in " ".join(run.stderr.split())
    assert not (tmp_path / "svg").exists()
