#!/usr/bin/env python3
"""Record the radix_cache lab's shipped scenarios (``kvlab/labs/data/radix.cbor.gz``).

No recorded SGLang fixtures exist in tests/sglang (kvlab.sglang is checked against SGLang
0.5.23 in lockstep there, where SGLang imports), so the decisions are kvlab.sglang's, which
that test holds exact against SGLang 0.5.23; the scenarios say so in their source name
("SGLang 0.5.23 (kvlab.sglang)"). Page size 1 only (kvlab.sglang's)::

    PYTHONPATH=$PWD .venv/bin/python tests/labs/record_radix_fixtures.py

``test_lab_radix_cache.py`` checks that the file equals a fresh recording.
"""
from __future__ import annotations

import sys
from pathlib import Path

from kvlab.labs.radix import RADIX_SOURCE, RadixSide, encode_radix_recordings, record_radix_ops

OUT = Path(__file__).resolve().parents[2] / "kvlab" / "labs" / "data" / "radix.cbor.gz"
CONFIGS = [(9, 11), (12, 12), (16, 13), (20, 14), (24, 15), (32, 16)]
"""(pool_tokens, seed) of each recording."""


def recordings() -> list:
    """The shipped recordings, made afresh by kvlab.sglang."""
    return [record_radix_ops(RadixSide({"pool_tokens": n, "page_size": 1}), seed, 110, RADIX_SOURCE)
            for n, seed in CONFIGS]  # fmt: skip


def main() -> int:
    OUT.write_bytes(encode_radix_recordings(recordings()))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
