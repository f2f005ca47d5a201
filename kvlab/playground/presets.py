"""Presets: the course's scenarios, ready to open in the playground (``?preset=nb03``).

Each reproduces its notebook's scenario call for call (same pool, design, prompts and order),
so the block ids, hashes and free-queue orders on the page are the notebook's
(tests/playground/test_presets.py checks the notebook's asserted values). A notebook links to
``playground/?preset=<name>``.

Examples:
    >>> PRESETS["nb04"].scenario["calls"].splitlines()[0]
    'prefill a'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvlab.i18n import N_

__all__ = ["DEFAULT_PRESET", "PRESETS", "Preset"]


@dataclass(frozen=True)
class Preset:
    """A named scenario.

    Attributes:
        name: Its key (``nb03`` ...), used in ``?preset=``.
        title: A short title (English, a catalogue message).
        description: What to watch, one or two sentences (English, a catalogue message).
        notebook: The course notebook it comes from (``03_the_lru_free_queue``), or "".
        scenario: The scenario dict (``kvlab.playground.scenario``).
    """

    name: str
    title: str
    description: str
    notebook: str
    scenario: dict[str, Any]


def _calls(*lines: str) -> str:
    return "\n".join(lines)


_PRESETS = (
    Preset(
        "shared",
        N_("Two chats share a system prompt"),
        N_(
            "The second request's get_computed_blocks hits the blocks the first one cached; "
            "edit a word of the shared prefix and run again to watch the hit shrink."
        ),
        "",
        {
            "num_gpu_blocks": 16,
            "block_size": 4,
            "text": "words",
            "driver": "scheduler",
            "max_num_batched_tokens": 64,
            "requests": [
                {
                    "id": "chat-1",
                    "prompt": "You are a helpful assistant . Answer briefly . "
                    "What is the capital of France ?",
                    "output": "Paris .",
                    "arrival": 0,
                    "max_tokens": 2,
                },
                {
                    "id": "chat-2",
                    "prompt": "You are a helpful assistant . Answer briefly . "
                    "What is the capital of Italy ?",
                    "output": "Rome .",
                    "arrival": 1,
                    "max_tokens": 2,
                },
            ],
            "predict": ["hit"],
        },
    ),
    Preset(
        "nb03",
        N_("Notebook 3: the LRU free queue and lazy eviction"),
        N_(
            "x and a fill the pool; free(a) then free(x) append their blocks tail first. b hits "
            "a's first three blocks and pops 14 and 13 from the head, evicting a's last two "
            "cached blocks; c then hits only 12 tokens."
        ),
        "03_the_lru_free_queue",
        {
            "num_gpu_blocks": 15,
            "block_size": 4,
            "max_model_len": 128,
            "driver": "calls",
            "requests": [
                {"id": "x", "prompt": "1000..1035"},
                {"id": "a", "prompt": "0..19"},
                {"id": "b", "prompt": "0..11 500..504"},
                {"id": "c", "prompt": "0..19"},
            ],
            "calls": _calls("admit x", "admit a", "free a", "free x", "admit b", "admit c"),
            "predict": ["popleft", "evict"],
        },
    ),
    Preset(
        "nb04",
        N_("Notebook 4: chained block hashes"),
        N_(
            "a computes 14 tokens (3 full blocks hashed, each hash chained to the one before); "
            "four lookups share 12, 8, 12 and 0 tokens with it and hit 12, 8, 8 and 0."
        ),
        "04_block_hashes_and_prefix_caching",
        {
            "num_gpu_blocks": 16,
            "block_size": 4,
            "max_model_len": 128,
            "driver": "calls",
            "requests": [
                {"id": "a", "prompt": "100..113"},
                {"id": "same-prefix", "prompt": "100..111 7 7 7"},
                {"id": "8-shared", "prompt": "100..107 1..7"},
                {"id": "exactly-12", "prompt": "100..111"},
                {"id": "first-differs", "prompt": "0 101..113"},
            ],
            "calls": _calls(
                "prefill a",
                "lookup same-prefix",
                "lookup 8-shared",
                "lookup exactly-12",
                "lookup first-differs",
            ),
            "predict": ["hit"],
        },
    ),
    Preset(
        "nb06",
        N_("Notebook 6: the sliding window"),
        N_(
            "With a window of 8 tokens, decoding replaces blocks that left the window with the "
            "null_block (REQ_BLOCKS_NULLED) and frees them; once block 1 is evicted, b still hits "
            "20 tokens: only the blocks inside the window must be cached."
        ),
        "06_sliding_window_and_chunked_local",
        {
            "num_gpu_blocks": 24,
            "block_size": 4,
            "max_model_len": 256,
            "layers": [8],
            "driver": "calls",
            "requests": [
                {"id": "a", "prompt": "0..11", "output": "100..109", "max_tokens": 64},
                {"id": "b", "prompt": "0..11 100..107 7 7", "max_tokens": 8},
            ],
            "calls": _calls("prefill a", "decode a 10", "evict 1", "lookup b"),
            "predict": ["window"],
        },
    ),
    Preset(
        "nb07",
        N_("Notebook 7: the hybrid fixed point"),
        N_(
            "Full attention plus windows of 8 and 12 tokens: with a's window-12 block 3 evicted, "
            "b's lookup needs two iterations of the fixed point to settle at 12 tokens."
        ),
        "07_hybrid_models_fixed_point",
        {
            "num_gpu_blocks": 40,
            "block_size": 4,
            "max_model_len": 256,
            "layers": ["full", 8, 12],
            "driver": "calls",
            "requests": [
                {"id": "a", "prompt": "0..20", "max_tokens": 8},
                {"id": "b", "prompt": "0..20", "max_tokens": 8},
            ],
            "calls": _calls("prefill a", "free a", "evict 16", "lookup b"),
            "predict": ["fixed_point"],
        },
    ),
    Preset(
        "nb08",
        N_("Notebook 8: the scheduler and preemption"),
        N_(
            "A 20-block pool, a 16-token budget and four seats: chunked prefill of 'long', "
            "prefix hits on the shared system prompt, and chat-3 preempted at step 4 when the "
            "pool runs dry."
        ),
        "08_the_scheduler",
        {
            "num_gpu_blocks": 20,
            "block_size": 4,
            "max_model_len": 128,
            "driver": "scheduler",
            "max_num_seqs": 4,
            "max_num_batched_tokens": 16,
            "requests": [
                {"id": "chat-1", "prompt": "100..111 1..5", "arrival": 0, "max_tokens": 6},
                {"id": "long", "prompt": "500..539", "arrival": 0, "max_tokens": 4},
                {"id": "chat-2", "prompt": "100..111 6..9", "arrival": 1, "max_tokens": 6},
                {"id": "chat-3", "prompt": "100..111 10..15", "arrival": 3, "max_tokens": 12},
                {"id": "burst", "prompt": "600..627", "arrival": 3, "max_tokens": 8},
            ],
            "predict": ["preempt"],
        },
    ),
)

PRESETS: dict[str, Preset] = {p.name: p for p in _PRESETS}
"""Presets by name, in the order the page lists them."""

DEFAULT_PRESET = "shared"
"""The preset the page opens with when the URL names none."""
