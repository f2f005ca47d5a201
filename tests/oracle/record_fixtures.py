#!/usr/bin/env python3
"""Record the real vLLM 0.22.1 KV-cache manager's decisions as replayable fixtures.

Runs in the oracle environment only (vLLM 0.22.1 importable, see ``../shared/oracle/``). It drives the
differential oracle's randomized, scheduler-like workloads (``diff_core.py``, imported by path, never
copied) through vLLM alone and writes, per seed, the config, every call with its arguments and vLLM's
return value, and after every operation the events taken and the observable state (free queue head to
tail, ``(ref_cnt, block_hash)`` per block, cached map, block ids per live request, ``len(block_hashes)``,
usage, ``num_cached_block`` and the non-empty ``req_to_blocks`` per manager). States are stored as
deltas against the previous state; block hashes are interned per seed.

``tests/oracle/test_oracle_fixtures.py`` replays the same calls through ``kvlab.core`` (no vLLM) and
asserts identical decisions.

Regenerate (one command, from the repository root; see docs/explanation/fidelity.md)::

    /work/oracle-venv/bin/python tests/oracle/record_fixtures.py \
        --diff-core ../shared/oracle/diff_core.py --seeds 0-299 --ops 400

Exit 0 when every seed was recorded; 2 when vLLM raised on a workload (a harness bug).
"""
from __future__ import annotations

import os
import sys

# vLLM seeds NONE_HASH from PYTHONHASHSEED: pin it before anything hashes.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import gzip  # noqa: E402
import importlib.util  # noqa: E402
import random  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import cbor2  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from oracle_codec import FORMAT_VERSION, Interner, encode_state_delta, norm  # noqa: E402

DEFAULT_DIFF_CORE = HERE.parents[1] / ".." / "shared" / "oracle" / "diff_core.py"


def load_diff_core(path: Path):
    spec = importlib.util.spec_from_file_location("diff_core", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"record_fixtures: cannot import diff_core from {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["diff_core"] = mod
    spec.loader.exec_module(mod)
    return mod


class RecordingPair:
    """Stands in for diff_core.Pair with a single (vLLM) side that logs every call and state."""

    def __init__(self, side, interner: Interner):
        self.a = side
        self.calls: list = []
        self.snap = None
        self.steps: list = []  # ["c", method, args, result] and ["s", delta]
        self._interner = interner
        self._prev_state: dict = {}

    def call(self, method, *args, compare=True):
        result = getattr(self.a, method)(*args)
        self.calls.append((method, result))
        self.steps.append(["c", method, norm(list(args), self._interner), norm(result, self._interner)])
        return result

    def check_state(self):
        events = self.call("take_events")
        snap = self.a.snapshot(True)
        state = {k: norm(v, self._interner) for k, v in snap.items()}
        self.steps.append(["s", encode_state_delta(self._prev_state, state)])
        self._prev_state = state
        self.snap = snap
        return events


def _add_boundary_families(dc) -> None:
    """Families diff_core does not draw, for the window / block-size boundaries.

    Sliding windows that are not block multiples and small against the hybrid alignment, so both
    ``cdiv(sliding_window - 1, block_size)`` sites matter (the hit length and the cached tail of each
    ``lcm_block_size`` segment): a window of 5 with blocks of 2 or 4 differs from ``cdiv(5, bs)``.
    """

    def fam_sw_bs2_small(r):
        return [dc._g("sw", 2, window=r.choice([3, 5, 5, 7]))]

    def fam_full16_sw4_small(r):
        return [dc._g("full", 16), dc._g("sw", 4, window=r.choice([3, 5, 5, 9, 6]))]

    def fam_full8_sw2_small(r):
        return [dc._g("full", 8), dc._g("sw", 2, window=r.choice([3, 5, 4]))]

    dc.FAMILIES.setdefault("sw(bs=2,small window)", (fam_sw_bs2_small, 2, None))
    dc.FAMILIES.setdefault("mixed:full16+sw4(small window)", (fam_full16_sw4_small, 2, None))
    dc.FAMILIES.setdefault("mixed:full8+sw2(small window)", (fam_full8_sw2_small, 1, None))


def record_seed(dc, accepted, seed: int, n_ops: int, counters: Counter) -> dict:
    r = random.Random(f"config-{seed}")
    weights = [dc.FAMILIES[f][1] for f in accepted]
    side = dc.VllmAdapter(f"vllm#{seed}")
    for _attempt in range(20):
        fam = r.choices(accepted, weights)[0]
        cfg = dc.make_config(fam, r)
        try:
            side.build(cfg)
            break
        except Exception:  # noqa: BLE001 - a config vLLM rejects is re-drawn, as diff_core does
            continue
    else:
        raise RuntimeError(f"seed {seed}: no config accepted by vLLM")
    interner = Interner()
    pair = RecordingPair(side, interner)
    run = dc.Run(seed, cfg, pair, n_ops, counters)
    run.execute()
    return {
        "seed": seed,
        "family": fam,
        "config": dataclasses.asdict(cfg),
        "hashes": interner.table,
        "steps": pair.steps,
    }


def parse_seeds(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            out.extend(range(int(lo), int(hi) + 1))
        elif part:
            out.append(int(part))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diff-core", type=Path, default=DEFAULT_DIFF_CORE, help="path of diff_core.py")
    ap.add_argument("--seeds", default="0-299")
    ap.add_argument("--ops", type=int, default=400)
    ap.add_argument("--shard", type=int, default=25, help="seeds per fixture file")
    ap.add_argument("--out", type=Path, default=HERE / "fixtures")
    args = ap.parse_args(argv)

    dc = load_diff_core(args.diff_core.resolve())
    import vllm

    if vllm.__version__ != "0.22.1":
        print(f"record_fixtures: vLLM {vllm.__version__} found, the fixtures must come from 0.22.1",
              file=sys.stderr)
        return 2
    _add_boundary_families(dc)
    probe = dc.probe_families(dc.VllmAdapter)
    rejected = {f: why for f, (ok, why) in probe.items() if not ok}
    if rejected:
        print(f"record_fixtures: families vLLM rejects (not recorded): {rejected}")
    accepted = [f for f, (ok, _) in probe.items() if ok]
    seeds = parse_seeds(args.seeds)
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("seeds_*.cbor.gz"):
        old.unlink()
    t0 = time.time()
    counters: Counter = Counter()
    families: Counter = Counter()
    total = 0
    for lo in range(0, len(seeds), args.shard):
        chunk = seeds[lo: lo + args.shard]
        records = []
        for seed in chunk:
            try:
                rec = record_seed(dc, accepted, seed, args.ops, counters)
            except Exception as ex:  # noqa: BLE001
                print(f"record_fixtures: seed {seed}: vLLM raised {type(ex).__name__}: {ex}", file=sys.stderr)
                return 2
            families[rec["family"]] += 1
            records.append(rec)
        doc = {"format": FORMAT_VERSION, "vllm": vllm.__version__, "ops": args.ops,
               "accepted_families": accepted, "records": records}
        path = args.out / f"seeds_{chunk[0]:04d}-{chunk[-1]:04d}.cbor.gz"
        data = gzip.compress(cbor2.dumps(doc), compresslevel=9, mtime=0)
        path.write_bytes(data)
        total += len(data)
        print(f"  {path.name}: {len(chunk)} seeds, {len(data) / 1e3:.0f} kB")
    fams = ", ".join(f"{f}={n}" for f, n in sorted(families.items(), key=lambda x: -x[1]))
    print(f"record_fixtures: {len(seeds)} seeds x {args.ops} ops, {total / 1e6:.2f} MB, "
          f"{time.time() - t0:.0f}s; families: {fams}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
