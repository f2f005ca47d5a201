"""The README is true when followed literally: every code block runs, in order, in one fresh
folder, and prints what the README shows.

- ```python blocks run as scripts with ``PYTHONHASHSEED=0`` (the README says why: NONE_HASH is
  random in each process otherwise). A ```text block right after one (only prose-free blank
  lines between) is its expected stdout, compared line by line; ``...`` marks a cut, as in
  doctest's ELLIPSIS. Nothing else is normalised.
- ```bash blocks run literally, as a newcomer types them after ``make demo``: each block in
  one bash shell in that folder (so ``source .venv/bin/activate`` holds for the lines after it
  and ``run.kvtrace`` saved by a Python block is there), with ``.venv`` this environment and
  ``kvlab`` not on the PATH before the block puts it there; every line must succeed without a
  traceback. ``make ...`` lines are checked by tests/test_makefile.py.
- The "next:" hints that ``kvlab demo`` and ``kvlab whatif --save`` print run as printed, in a
  plain shell and in one where the environment is active.
- Every repository path the README names in backticks exists, and it names nothing a clone
  lacks (a sibling ``../shared`` folder, "the study notes").
"""

from __future__ import annotations

import doctest
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def readme_blocks() -> list[tuple[str, str, str | None]]:
    """(language, code, expected output or None) for every block, in README order."""
    text = README.read_text(encoding="utf-8")
    fences = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)]
    blocks: list[tuple[str, str, str | None]] = []
    for i, (lang, code, _start, end) in enumerate(fences):
        if lang == "text" and i and fences[i - 1][0] == "python":
            continue  # an expected output, attached below
        expected = None
        if lang == "python" and i + 1 < len(fences) and fences[i + 1][0] == "text":
            between = text[end:fences[i + 1][2]]
            # the prose between a snippet and its output is one short "prints ...:" line
            if between.strip().endswith(":") and between.count("\n\n") <= 2:
                expected = fences[i + 1][1]
        blocks.append((lang, code, expected))
    return blocks


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "COLUMNS": "120",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _newcomer(folder: Path) -> dict[str, str]:
    """``folder`` as a clone after ``make demo`` (``.venv`` is this environment) and the
    environment of a shell where it is not active yet (no ``kvlab`` on the PATH)."""
    venv = Path(sys.prefix)
    if not (venv / "bin" / "kvlab").is_file() or not (venv / "bin" / "activate").is_file():
        pytest.fail(f"the tests run from a virtual environment with the kvlab script ({venv})")
    (folder / ".venv").symlink_to(venv, target_is_directory=True)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not (Path(p) / "kvlab").exists()]
    env = {**_env(), "PATH": os.pathsep.join(path)}
    env.pop("VIRTUAL_ENV", None)
    return env


def _bash(script: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, (
        f"{script!r} failed as printed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def _check_output(expected: str, got: str, where: str) -> None:
    want = "\n".join(line.rstrip() for line in expected.splitlines()) + "\n"
    have = "\n".join(line.rstrip() for line in got.splitlines()) + "\n"
    checker = doctest.OutputChecker()
    if not checker.check_output(want, have, doctest.ELLIPSIS):
        diff = checker.output_difference(doctest.Example("", want), have, doctest.ELLIPSIS)
        pytest.fail(f"{where} prints something else than the README shows:\n{diff}")


def test_the_readme_has_the_blocks_this_test_knows() -> None:
    blocks = readme_blocks()
    langs = [lang for lang, _code, _out in blocks]
    assert langs.count("python") == 2 and langs.count("bash") == 2
    assert all(out is not None for lang, _c, out in blocks if lang == "python")
    assert all(lang in ("", "python", "bash", "text") for lang in langs)


@pytest.mark.model
def test_every_readme_block_runs_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    env = _newcomer(tmp_path)
    ran = []
    for n, (lang, code, expected) in enumerate(readme_blocks()):
        if lang == "python":
            script = tmp_path / f"readme_block_{n}.py"
            script.write_text(code, encoding="utf-8")
            proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(),
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, f"README python block {n} failed:\n{proc.stderr}"
            _check_output(expected or "", proc.stdout, f"README python block {n}")
            ran.append(f"python {n}")
        elif lang == "bash":
            lines = [ln for ln in code.splitlines()
                     if shlex.split(ln, comments=True) and not ln.startswith("make ")]
            if lines:
                _bash("\n".join(lines), tmp_path, env)  # NOTE: literally, in one shell
                ran += [" ".join(shlex.split(ln, comments=True)[:2]) for ln in lines]
    assert ran == ["python 3", "source .venv/bin/activate", "kvlab generate", "kvlab trace",
                   "kvlab trace", "kvlab figures", "kvlab compare", "python 5"], ran
    assert (tmp_path / "run.kvtrace").is_file() and (tmp_path / "figures").is_dir()


def test_kvlab_is_not_found_until_the_readme_says_how(tmp_path: Path) -> None:
    """The newcomer's shell of the tests above really lacks kvlab (else they prove nothing)."""
    env = _newcomer(tmp_path)
    plain = subprocess.run(["bash", "-c", "kvlab --version"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert plain.returncode == 127 and "kvlab: command not found" in plain.stderr
    _bash(".venv/bin/kvlab --version", tmp_path, env)
    _bash("source .venv/bin/activate\nkvlab --version", tmp_path, env)


def _hint(output: str, prefix: str) -> str:
    (line,) = [ln.strip() for ln in output.splitlines() if ln.strip().startswith(prefix)]
    return line[len(prefix):].strip()


@pytest.mark.parametrize("active", [False, True], ids=["plain shell", "active venv"])
def test_the_hint_whatif_prints_runs_as_printed(tmp_path: Path, active: bool) -> None:
    env = _newcomer(tmp_path)
    trace = REPO / "tests" / "data" / "mooncake" / "conversation_excerpt.jsonl"
    run = (f"{'source .venv/bin/activate; kvlab' if active else '.venv/bin/kvlab'} whatif "
           f"{trace} --capacity-tokens 1e5 --limit 5 --no-progress --trace-at 1e5 "
           "--save run.kvtrace")
    proc = _bash(run, tmp_path, env)
    command = _hint(proc.stdout, "show it:").split(", or ")[0]
    assert command == ("kvlab" if active else ".venv/bin/kvlab") + " trace show run.kvtrace"
    shown = _bash(("source .venv/bin/activate; " if active else "") + command, tmp_path, env)
    assert "free_block_queue" in shown.stdout


@pytest.mark.model
@pytest.mark.slow
def test_the_hints_the_demo_prints_run_as_printed(tmp_path: Path) -> None:
    env = _newcomer(tmp_path)
    demo = _bash(".venv/bin/kvlab demo --quick", tmp_path, env)  # what `make demo` runs
    command = _hint(demo.stdout, "next:")
    assert command.startswith(".venv/bin/kvlab trace show kvlab-demo/demo.kvtrace --event ")
    shown = _bash(command, tmp_path, env)
    assert "free_block_queue" in shown.stdout and "events " in shown.stdout
    page = _hint(demo.stdout, "or open").split(" in a browser")[0]
    assert (tmp_path / page).is_file()
    tip = _hint(demo.stdout, "tip: run").split(" once in this shell")[0]
    assert tip == "source .venv/bin/activate"
    _bash(f"{tip}\n{command.replace('.venv/bin/kvlab', 'kvlab', 1)}", tmp_path, env)


def test_trace_show_event_in_the_readme_is_inside_the_trace() -> None:
    """The README's `trace show run.kvtrace --event N` names an event its snippet's trace has."""
    text = README.read_text(encoding="utf-8")
    (shown,) = re.findall(r"kvlab trace show run\.kvtrace --event (\d+)", text)
    (count,) = re.findall(r"^(\d+) events$", text, re.M)
    assert 0 <= int(shown) < int(count)


PATH = re.compile(r"`((?:\.\./|[\w.-]+/)[\w./-]*)`")


def test_the_readme_names_only_what_a_clone_has() -> None:
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text and "study notes" not in text
    named = {m.group(1) for m in PATH.finditer(text)}
    # outputs the README says commands write; vLLM's own source paths.
    generated = {"kvlab-demo/demo.kvtrace", "kvlab-demo/demo.html", "site/", "site/zh/"}
    missing = [p for p in sorted(named - generated)
               if not p.startswith("vllm/") and not (REPO / p).exists()]
    assert missing == []
    for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (REPO / path).is_file(), path
