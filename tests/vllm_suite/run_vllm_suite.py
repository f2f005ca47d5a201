#!/usr/bin/env python3
"""Run vLLM 0.22.1's own test files, unmodified, on the real vLLM and on kvlab; print the counts.

Needs the vLLM environment: an interpreter where vLLM 0.22.1 imports (``../shared/oracle/
setup_oracle_venv.sh VENV``) and vLLM's source tree with its tests (only the sdist has them)::

    mkdir -p /work/vllm-src/T && cd /work/vllm-src && TMPDIR=$PWD/T pip download --no-deps \\
        --no-binary :all: --no-build-isolation --no-clean vllm==0.22.1 -d DIR   # ends with an error
    ln -sfn T/pip-download-*/vllm_*/ /work/vllm-src/src
    VENV/bin/python tests/vllm_suite/run_vllm_suite.py --src /work/vllm-src/src

Each file runs twice in a subprocess from the source tree (``--confcutdir`` at the file's folder:
vLLM's root conftest needs packages the CPU environment lacks; a folder's own conftest is kept),
both times with
``-p vllm_env`` (vLLM's CPU platform, stand-in model configs in an offline hub cache): once as is,
once with ``-p kvlab_redirect`` (vLLM's KV-cache modules served by kvlab's). Exit 1 when a test
that passes on vLLM fails on kvlab.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# The folders and files vLLM's suite is measured on (issue "mirror"): every test file in them.
SUITE = [
    "tests/v1/core",
    "tests/v1/kv_connector/unit",
    "tests/v1/worker/test_gpu_input_batch.py",
    "tests/v1/engine/test_init_error_messaging.py",
    "tests/v1/test_request.py",
]


def suite_files(src: Path) -> list[str]:
    """Every ``test_*.py`` under SUITE's folders (recursively) plus its single files, sorted."""
    files = []
    for entry in SUITE:
        path = src / entry
        if path.is_dir():
            files += sorted(str(f.relative_to(src)) for f in path.rglob("test_*.py"))
        else:
            files.append(entry)
    return files


# A test outcome line of -rA ("ERROR <date> ..." log lines are not: the id names a .py file).
_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+\.py(?:::\S+)?)")


def run_file(python: str, src: Path, test_file: str, kvlab: bool, timeout: int) -> dict[str, str]:
    """nodeid -> outcome for one file ("ERROR <file>" when it does not even collect)."""
    env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR", PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    # --confcutdir: only conftests in the test file's own folder (vLLM's root conftest needs
    # packages the CPU environment lacks; a folder's own one holds the fixtures its tests use).
    cmd = [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
           "--confcutdir", str(Path(test_file).parent), "-p", "vllm_env", test_file]
    if kvlab:
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), env["PYTHONPATH"]])
        cmd[-1:-1] = ["-p", "kvlab_redirect"]
    try:
        proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True, timeout=timeout)
        out = proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        return {test_file: "TIMEOUT"}
    results = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            results[m.group(2)] = m.group(1)
    if not results:
        tail = " | ".join(out.strip().splitlines()[-3:])
        results[test_file] = f"ERROR ({tail[:300]})"
    return results


def _count(results: dict[str, str]) -> str:
    passed = sum(v == "PASSED" for v in results.values())
    return f"{passed}/{len(results)}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", type=Path, default=Path(os.environ.get("KVLAB_VLLM_SRC", "/work/vllm-src/src")))
    ap.add_argument("--python", default=sys.executable, help="an interpreter with vLLM 0.22.1")
    ap.add_argument("--timeout", type=int, default=480, help="seconds per file and side")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every test failing on kvlab only")
    ap.add_argument("files", nargs="*", help="test files (default: every file of SUITE)")
    args = ap.parse_args(argv)
    src = args.src.resolve()
    if not (src / "tests" / "v1").is_dir():
        ap.error(f"{src} has no tests/v1: point --src at vLLM 0.22.1's unpacked sdist")
    print("| vLLM 0.22.1 test file | passed on vLLM | passed on kvlab | pass on vLLM, fail on kvlab |")
    print("|---|---|---|---|")
    regressions = {}
    for test_file in args.files or suite_files(src):
        real = run_file(args.python, src, test_file, False, args.timeout)
        ours = run_file(args.python, src, test_file, True, args.timeout)
        lost = sorted(k for k, v in real.items() if v == "PASSED" and ours.get(k) != "PASSED")
        if any(k == test_file for k in ours) and any(v == "PASSED" for v in real.values()):
            lost = [f"{test_file}: {ours[test_file]}"]
        regressions[test_file] = lost
        print(f"| {test_file} | {_count(real)} | {_count(ours)} | {len(lost)} |", flush=True)
    if args.verbose:
        for test_file, lost in regressions.items():
            for nodeid in lost:
                print(f"  kvlab only fails: {nodeid}")
    return 1 if any(regressions.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
