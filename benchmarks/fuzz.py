"""Coverage-guided fuzzing of kvlab's readers: ``benchmarks/fuzz.py TARGET --minutes N``.

Runs atheris (libFuzzer for Python; ``pip install atheris coverage``, or the ``fuzz`` extra) on
one target of ``benchmarks/fuzz_targets.py`` (``player-js``: ``benchmarks/fuzz_js.py``) for N
CPU minutes of the fuzzing process and its children (player-js decodes in a Node worker; the
machine is shared: wall time varies, CPU time does not), seeded with the committed corpus
``tests/fuzz_corpus/TARGET/``. Work files go under ``.fuzz/TARGET/`` (ignored by git): the
growing corpus, ``findings/`` (one input and traceback per distinct disallowed outcome: an
exception the target does not document, a bad message, a timeout, running out of the memory
bound) and ``summary.json`` (execs, CPU seconds, coverage).

Bounds enforced on every input (a finding when exceeded):
    time: ``-timeout`` (default 10 s) per input;
    memory: the address space may grow by at most ``--memory-mb`` (default 1024 MiB) over the
    process's size after start-up (``RLIMIT_AS``), so an allocation sized by a declared length
    fails with MemoryError, a finding.

Other modes:
    --replay FILE...   run inputs through the target and print each outcome;
    --minimize         cut .fuzz/TARGET/corpus to the inputs that each add coverage, smallest
                       first, and print them;
    --coverage         line coverage of the target's kvlab modules over .fuzz/TARGET/corpus;
    --export N         minimize, then copy the N smallest inputs of the merged corpus and every
                       finding's input (``crash-*``) into tests/fuzz_corpus/TARGET/ (for CI).

Examples:
    PYTHONPATH=$PWD:$PWD/.fuzzlib .venv/bin/python benchmarks/fuzz.py kvtrace --minutes 10
    PYTHONPATH=$PWD:$PWD/.fuzzlib .venv/bin/python benchmarks/fuzz.py kvtrace --coverage
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
CORPUS = ROOT / "tests" / "fuzz_corpus"
WORK = ROOT / ".fuzz"


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (seconds), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a live process and its live descendants (player-js: the Node worker,
    where that target's decoding runs)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += _cpu_seconds(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return total


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------------------- child (atheris)
def _child(name: str, memory_mb: int, fuzzer_args: list[str]) -> None:
    import atheris

    import fuzz_targets as ft

    assert not any(m.startswith("kvlab") for m in sys.modules), "kvlab imported too early"
    with atheris.instrument_imports(include=list(_instrument(name))):
        if name == "player-js":
            import fuzz_js

            target = fuzz_js.target()
        else:
            target = ft.TARGETS[name]
            for module in target.instrument:
                __import__(module)
    findings = WORK / name / "findings"
    findings.mkdir(parents=True, exist_ok=True)
    seen = {p.stem for p in findings.glob("*.txt")}
    workdir = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-", dir="/dev/shm"))
    limit = _vm_size() + (memory_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def one_input(data: bytes) -> None:
        try:
            ft.execute(target, data, workdir)
        except ft.Disallowed as finding:
            slug = re.sub(r"[^A-Za-z0-9]+", "-", finding.signature).strip("-")[:120]
            if slug not in seen:
                seen.add(slug)
                (findings / f"{slug}.input").write_bytes(data)
                (findings / f"{slug}.txt").write_text(f"{finding.signature}\n\n{finding.detail}\n")
                print(f"FINDING {finding.signature}", flush=True)

    atheris.Setup([sys.argv[0], *fuzzer_args], one_input)
    atheris.Fuzz()


def _instrument(name: str) -> tuple[str, ...]:
    if name == "player-js":
        return ("fuzz_js",)
    import fuzz_targets as ft

    return ft.INSTRUMENT[name]


def _tokens(name: str) -> tuple[str, ...]:
    if name == "player-js":
        import fuzz_js

        return fuzz_js.TOKENS
    import fuzz_targets as ft

    return ft.TARGETS[name].tokens


def _max_len(name: str) -> int:
    if name == "player-js":
        import fuzz_js

        return fuzz_js.MAX_LEN
    import fuzz_targets as ft

    return ft.TARGETS[name].max_len


# ---------------------------------------------------------------------------- campaign
_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")


def campaign(name: str, minutes: float, timeout_s: int, memory_mb: int) -> dict:
    """Fuzz ``name`` for ``minutes`` CPU minutes; restart after a timeout / memory finding."""
    base = WORK / name
    corpus, artifacts = base / "corpus", base / "artifacts"
    for d in (corpus, artifacts, base / "findings"):
        d.mkdir(parents=True, exist_ok=True)
    for seed in sorted((CORPUS / name).glob("*")):
        shutil.copy(seed, corpus / seed.name)
    tokens = _tokens(name)
    dict_args = []
    if tokens:
        (base / "tokens.dict").write_text("".join(f'"{_dict_escape(t)}"\n' for t in tokens))
        dict_args = [f"-dict={base / 'tokens.dict'}"]
    budget, used, wall0 = minutes * 60.0, 0.0, time.time()
    stats = {"execs": 0, "cov": 0, "ft": 0}
    runs, log_path = 0, base / "fuzz.log"
    while used < budget - 1:
        args = [f"-timeout={timeout_s}", f"-rss_limit_mb={memory_mb + 2048}",
                f"-max_len={_max_len(name)}", f"-artifact_prefix={artifacts}/",
                "-print_final_stats=1", "-reload=0", *dict_args, str(corpus)]  # fmt: skip
        cmd = [sys.executable, __file__, name, "--child", "--memory-mb", str(memory_mb), "--", *args]
        offset = log_path.stat().st_size if log_path.exists() else 0
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(log_path, "a") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    env={**os.environ, "PYTHONHASHSEED": "0",
                                         "KVLAB_FUZZ_CHILD": "1"})  # fmt: skip
        runs += 1
        start_used, last = used, time.time()
        seen = 0.0
        while proc.poll() is None:
            seen = max(seen, _tree_cpu_seconds(proc.pid))
            used = start_used + seen
            if used >= budget:
                proc.send_signal(signal.SIGUSR1)  # NOTE: libFuzzer exits, printing its stats
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                break
            time.sleep(1.0)
            if time.time() - last > 60:
                last = time.time()
                run = _parse_log(log_path, offset)
                print(f"  {name}: {used / 60:.1f}/{minutes} CPU min, execs "
                      f"{stats['execs'] + run['execs']}, cov {max(stats['cov'], run['cov'])}",
                      flush=True)  # fmt: skip
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        reaped = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        used = start_used + max(seen, reaped)  # NOTE: a descendant never reaped is not in rusage
        run = _parse_log(log_path, offset)
        stats["execs"] += run["execs"]
        stats["cov"], stats["ft"] = max(stats["cov"], run["cov"]), max(stats["ft"], run["ft"])
        if proc.returncode != 0 and used < budget - 1:
            output = log_path.read_text(errors="replace")[offset:]
            if run["execs"] == 0 and not any(artifacts.iterdir()):
                raise SystemExit(f"the fuzzer did not start:\n{output[-2000:]}")
            _record_crash(base, artifacts, output)
    findings = sorted(p.read_text().splitlines()[0] for p in (base / "findings").glob("*.txt"))
    summary = {"target": name, "cpu_minutes": round(used / 60, 2),
               "wall_minutes": round((time.time() - wall0) / 60, 2), "execs": stats["execs"],
               "libfuzzer_cov": stats["cov"], "libfuzzer_ft": stats["ft"],
               "corpus_files": len(list(corpus.iterdir())), "runs": runs,
               "findings": findings}  # fmt: skip
    (base / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _dict_escape(token: str) -> str:
    """A libFuzzer dictionary entry: printable ASCII as is, every other byte as \\xNN."""
    return "".join(chr(b) if 32 <= b < 127 and b not in b'"\\' else f"\\x{b:02x}"
                   for b in token.encode("latin-1", "replace"))  # fmt: skip


def _parse_log(path: Path, offset: int) -> dict:
    """execs / cov / ft of one libFuzzer run, from its log (from ``offset``)."""
    out = {"execs": 0, "cov": 0, "ft": 0}
    with open(path, errors="replace") as f:
        f.seek(offset)
        for line in f:
            m = _STATUS.match(line)
            if m:
                out["execs"] = max(out["execs"], int(m.group(1)))
                out["cov"], out["ft"] = max(out["cov"], int(m.group(2))), max(out["ft"], int(m.group(3)))
            elif line.startswith("stat::number_of_executed_units:"):
                out["execs"] = max(out["execs"], int(line.rsplit(":", 1)[1]))
    return out


def _record_crash(base: Path, artifacts: Path, output: str) -> str:
    """A child that died (timeout, out of memory, an uncaught error): keep its input."""
    kind = "timeout" if "timeout" in output.lower() else "out-of-memory" if "out-of-memory" in output \
        else "crash"  # fmt: skip
    newest = max(artifacts.glob("*"), key=lambda p: p.stat().st_mtime, default=None)
    findings = base / "findings"
    if newest is not None:
        slug = f"{kind}-{hashlib.sha1(newest.read_bytes()).hexdigest()[:12]}"
        shutil.copy(newest, findings / f"{slug}.input")
        (findings / f"{slug}.txt").write_text(f"{kind} (libFuzzer)\n\n{output[-3000:]}\n")
        return slug
    return kind


# ---------------------------------------------------------------------------- other modes
def replay(name: str, files: list[Path]) -> int:
    import fuzz_targets as ft

    target = _target(name)
    limit = _vm_size() + (1024 << 20)  # NOTE: a hostile input must not take the machine down
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            t0 = time.perf_counter()
            try:
                out = ft.execute(target, f.read_bytes(), Path(tmp))
                what = "result" if out is None else f"error: {out[:160]}"
            except ft.Disallowed as finding:
                bad += 1
                what = f"DISALLOWED {finding.signature}\n{finding.detail}"
            print(f"{f.name}: {time.perf_counter() - t0:.3f} s {what}")
    return 1 if bad else 0


def _target(name: str):  # type: ignore[no-untyped-def]
    if name == "player-js":
        import fuzz_js

        return fuzz_js.target()
    import fuzz_targets as ft

    return ft.TARGETS[name]


def minimize(name: str) -> list[Path]:
    """The campaign corpus cut to inputs that each add coverage, smallest first (kvlab lines by
    coverage.py; the player's JavaScript blocks by V8), copied to .fuzz/NAME/min.

    NOTE: libFuzzer's own -merge re-executes argv[0], which an atheris script run by an
    interpreter is not."""
    import coverage as cov_mod

    import fuzz_targets as ft

    base = WORK / name
    out = base / "min"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    target = _target(name)
    files = sorted((base / "corpus").glob("*"), key=lambda p: (p.stat().st_size, p.name))
    seen: set = set()
    cov = cov_mod.Coverage(data_file=None, include=[str(ROOT / "kvlab" / "*")])
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            cov.erase()
            cov.start()
            try:
                ft.execute(target, f.read_bytes(), Path(tmp))
            except ft.Disallowed:
                pass
            finally:
                cov.stop()
            data = cov.get_data()
            got = {(m, n) for m in data.measured_files() for n in data.lines(m) or ()}
            got |= set(getattr(target.run, "last_blocks", ()))
            if got - seen:
                seen |= got
                shutil.copy(f, out / f.name)
    return sorted(out.iterdir(), key=lambda p: p.stat().st_size)


def export(name: str, keep: int) -> list[str]:
    """Copy a small corpus into tests/fuzz_corpus/NAME: ``cov-*`` from the merge, ``crash-*``
    from every finding (this campaign's and archived rounds')."""
    dest = CORPUS / name
    for old in dest.glob("cov-*"):
        old.unlink()
    merged = minimize(name)[:keep]
    out = []
    for p in merged:
        digest = hashlib.sha1(p.read_bytes()).hexdigest()[:12]
        shutil.copy(p, dest / f"cov-{digest}")
        out.append(f"cov-{digest}")
    dirs = [*sorted((WORK / "archive").glob(f"{name}-round*")), WORK / name / "findings"]
    kinds = set()  # NOTE: one input per finding, digits aside (message lengths, line numbers)
    for d in dirs:
        for p in sorted(d.glob("*.input")):
            kind = re.sub(r"\d+", "N", p.stem)
            if kind in kinds and not p.stem.startswith("timeout"):
                continue
            kinds.add(kind)
            target = dest / f"crash-{p.stem[:80]}"
            shutil.copy(p, target)
            out.append(target.name)
    return out


def coverage(name: str) -> dict:
    """Line coverage (coverage.py) of the target's kvlab modules over the campaign's corpus."""
    import coverage as cov_mod

    import fuzz_targets as ft

    files = sorted((WORK / name / "corpus").glob("*")) or sorted((CORPUS / name).glob("*"))
    cov = cov_mod.Coverage(data_file=None, include=[str(ROOT / "kvlab" / "*")], branch=False)
    cov.start()  # NOTE: before the first kvlab import, so definitions count as run
    target = _target(name)
    blocks: set[str] = set()  # player-js: V8 block coverage of the static JS, from the worker
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            try:
                ft.execute(target, f.read_bytes(), Path(tmp))
            except ft.Disallowed:
                pass
            blocks |= set(getattr(target.run, "last_blocks", ()))
    cov.stop()
    data = cov.get_data()
    report = {}
    if name == "player-js":
        for js in sorted({b.split(":")[0] for b in blocks}):
            report[f"kvlab/viz/static/{js}"] = f"{sum(b.startswith(js + ':') for b in blocks)} V8 blocks run"
    for path in sorted(data.measured_files()):
        _, statements, _, missing, _ = cov.analysis2(path)
        rel = str(Path(path).relative_to(ROOT))
        if statements and rel in target.measure:
            report[rel] = f"{len(statements) - len(missing)}/{len(statements)} lines"
    return {"inputs": len(files), "files": report}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("target")
    parser.add_argument("--minutes", type=float, default=10.0, help="CPU minutes of fuzzing")
    parser.add_argument("--timeout", type=int, default=10, help="seconds allowed per input")
    parser.add_argument("--memory-mb", type=int, default=1024,
                        help="address space an input may add (MiB)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--replay", nargs="+", type=Path)
    parser.add_argument("--minimize", action="store_true")
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--export", type=int, metavar="N")
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.child:
        _child(args.target, args.memory_mb, rest)
        return 0
    if args.replay:
        return replay(args.target, args.replay)
    if args.minimize:
        for p in minimize(args.target):
            print(p)
        return 0
    if args.export is not None:
        print("\n".join(export(args.target, args.export)))
        return 0
    if args.coverage:
        print(json.dumps(coverage(args.target), indent=1))
        return 0
    print(json.dumps(campaign(args.target, args.minutes, args.timeout, args.memory_mb), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
