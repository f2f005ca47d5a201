"""Scenarios for the playground tests (not a test module): the presets plus seeded random ones.

``random_scenario(seed)`` draws a small scenario that exercises what the page can set: pool and
block sizes, full / sliding-window / hybrid designs, caching on and off, sha256 / sha256_cbor,
both drivers, shared prefixes (so lookups hit), arrivals, max_tokens, tight budgets and pools
(so the scheduler preempts and allocations are refused), evictions and resets.
"""

from __future__ import annotations

import random
from typing import Any

from kvlab.playground import PRESETS


def random_scenario(seed: int) -> dict[str, Any]:
    """A random scenario dict (always valid for parse_scenario and kvlab.core)."""
    rng = random.Random(seed)
    block_size = rng.choice([1, 2, 4, 4, 8])
    design = rng.choice(["full", "full", "window", "hybrid"])
    if design == "full":
        layers: list[Any] = ["full"]
    elif design == "window":
        layers = [rng.randint(1, 24)]
    else:
        layers = ["full", *rng.sample([4, 6, 8, 12, 16], rng.randint(1, 2))]
    prefixes = [[rng.randrange(1000) for _ in range(rng.randint(0, 20))] for _ in range(2)]
    requests = []
    for i in range(rng.randint(1, 6)):
        prompt = rng.choice(prefixes) + [rng.randrange(1000) for _ in range(rng.randint(1, 14))]
        requests.append(
            {
                "id": f"r{i}",
                "prompt": " ".join(map(str, prompt)),
                "output": " ".join(str(rng.randrange(1000)) for _ in range(rng.randint(0, 3))),
                "arrival": rng.randint(0, 4),
                "max_tokens": rng.randint(1, 6),
            }
        )
    scenario: dict[str, Any] = {
        "num_gpu_blocks": rng.randint(6, 40),
        "block_size": block_size,
        "max_model_len": 64,
        "layers": layers,
        "enable_caching": rng.random() < 0.85,
        "hash": rng.choice(["sha256", "sha256_cbor"]),
        "requests": requests,
        "predict": ["popleft", "evict", "hit", "window", "fixed_point", "preempt"],
    }
    if rng.random() < 0.5:
        scenario.update(
            driver="scheduler",
            max_num_seqs=rng.randint(1, 4),
            max_num_batched_tokens=rng.choice([8, 16, 32, 2048]),
            scheduler_reserve_full_isl=rng.random() < 0.5,
            enable_chunked_prefill=rng.random() < 0.8,
        )
    else:
        stage = {r["id"]: "new" for r in requests}  # new -> computed -> freed
        lines = []
        for _ in range(rng.randint(2, 16)):
            op = rng.choice(
                ["admit", "admit", "prefill", "decode", "lookup", "free", "evict", "reset"]
            )
            if op == "evict":
                lines.append(f"evict {rng.randrange(1, scenario['num_gpu_blocks'])}")
                continue
            if op == "reset":
                lines.append("reset")
                continue
            wanted = {
                "admit": "new",
                "prefill": "new",
                "lookup": "new",
                "decode": "computed",
                "free": "computed",
            }[op]
            ready = [r for r, st in stage.items() if st == wanted]
            if not ready:
                continue
            rid = rng.choice(ready)
            if op == "decode":
                lines.append(f"decode {rid} {rng.randint(1, 3)}")
            else:
                lines.append(f"{op} {rid}")
            stage[rid] = {"admit": "computed", "prefill": "computed", "free": "freed"}.get(
                op, stage[rid]
            )
        scenario.update(driver="calls", calls="\n".join(lines))
    return scenario


def scenarios(num_random: int) -> list[tuple[str, dict[str, Any]]]:
    """(name, scenario) for every preset, then ``num_random`` random ones."""
    out = [(name, p.scenario) for name, p in PRESETS.items()]
    return out + [(f"random-{seed}", random_scenario(seed)) for seed in range(num_random)]
