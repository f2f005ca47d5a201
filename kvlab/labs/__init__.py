"""kvlab.labs: build-it labs. Write vLLM's KV-cache pieces yourself; kvlab grades them against vLLM.

Each lab (``notebooks/labs/``) gives the skeleton of one piece of vLLM 0.22.1 (its signature and
contract) and a check cell. ``check(lab, implementation)`` plugs the learner's class or function
into kvlab's engine in place of kvlab's own, replays scenarios, and compares every decision with
vLLM 0.22.1's recorded decisions (shipped in the package) and with kvlab's reference on fresh
randomized workloads. At the first decision that differs it reports what vLLM did and what the
learner's code did, recognises typical mistakes (a hint naming the concept and the notebook
section that teaches it) and opens the player there, vLLM's run beside the learner's state.

=========================  ===============================================================
lab                        the learner writes
=========================  ===============================================================
free_queue                 FreeKVCacheBlockQueue (popleft, popleft_n, remove, append, ...)
block_pool                 BlockPool (get_new_blocks, touch, free_blocks, cache_full_blocks,
                           _maybe_evict_cached_block)
block_hash                 hash_block_tokens, generate_block_hash_extra_keys,
                           get_request_block_hasher
full_attention_hit         FullAttentionManager.find_longest_cache_hit
sliding_window_hit         SlidingWindowManager.find_longest_cache_hit, get_num_skipped_tokens,
                           remove_skipped_blocks
hybrid_fixed_point         HybridKVCacheCoordinator.find_longest_cache_hit
allocate_slots_layout      KVCacheManager.allocate_slots
nano_block_manager         nano-vllm's BlockManager
radix_cache                SGLang's RadixCache (match_prefix with splits, insert, evict,
                           inc_lock_ref, dec_lock_ref), graded against SGLang 0.5.23
=========================  ===============================================================

Examples:
    >>> from kvlab.labs import LABS, check
    >>> LABS[:2]
    ('free_queue', 'block_pool')
    >>> from kvlab.core import FreeKVCacheBlockQueue
    >>> check("free_queue", FreeKVCacheBlockQueue, seed=0).passed     # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import os
from typing import Any

# NOTE: each module registers its lab; imported in course order (LABS keeps it).
from kvlab.labs import lab_free_queue  # noqa: F401, I001
from kvlab.labs import lab_block_pool  # noqa: F401
from kvlab.labs import lab_block_hash  # noqa: F401
from kvlab.labs import lab_full_attention_hit  # noqa: F401
from kvlab.labs import lab_sliding_window_hit  # noqa: F401
from kvlab.labs import lab_hybrid_fixed_point  # noqa: F401
from kvlab.labs import lab_allocate_slots_layout  # noqa: F401
from kvlab.labs import lab_nano_block_manager  # noqa: F401
from kvlab.labs import lab_radix_cache  # noqa: F401
from kvlab.labs.engine import DEFAULT_TIME_LIMIT_S, run_lab
from kvlab.labs.registry import Lab, Misconception, registered
from kvlab.labs.result import Divergence, LabResult
from kvlab.labs.timing import Scaling, remove_scaling

__all__ = ["DEFAULT_TIME_LIMIT_S", "LABS", "Divergence", "Lab", "LabNotPassed", "LabResult",
           "Misconception", "Scaling", "check", "lab", "remove_scaling"]  # fmt: skip

LABS: tuple[str, ...] = tuple(registered())
"""The labs' names, in course order."""


def lab(name: str) -> Lab:
    """The lab called ``name`` (its title, notebook, scenarios and catalogue).

    Raises:
        ValueError: For a name not in LABS (the message lists them).
    """
    labs = registered()
    if name not in labs:
        raise ValueError(f"unknown lab {name!r}; the labs are: {', '.join(labs)}")
    return labs[name]


class LabNotPassed(AssertionError):
    """Raised by check() only under ``KVLAB_LABS_STRICT=1`` (an autograder such as nbgrader
    counts a cell that raises as failed); it shows as the report, without a traceback."""

    def __init__(self, result: LabResult) -> None:
        super().__init__(str(result))
        self.result = result

    def _render_traceback_(self) -> list[str]:  # IPython: show the report, not a traceback
        return str(self.result).splitlines()


def check(name: str, implementation: Any, *, seed: int | None = None,
          time_limit_s: float | None = None, lang: str | None = None) -> LabResult:
    """Grade ``implementation`` against vLLM 0.22.1's decisions, scenario by scenario.

    Never raises for what the implementation does: an exception, an endless loop (stopped after
    ``time_limit_s`` per scenario), a body that still raises NotImplementedError, or an object of
    the wrong kind all come back as a failed LabResult with a plain message.

    Args:
        name: A lab from LABS.
        implementation: What the learner wrote: the class (``FreeKVCacheBlockQueue``,
            ``BlockPool``, ``SlidingWindowManager``, ``BlockManager``, ``RadixCache``) or the function(s)
            (``find_longest_cache_hit``, ``allocate_slots``; a tuple of functions for
            ``block_hash``) with vLLM's signature. A subclass of kvlab's own class passes.
        seed: Seed of the fresh randomized scenarios (None = a new one; the result says which,
            to reproduce a failure).
        time_limit_s: Time limit per scenario (seconds); None = ``KVLAB_LABS_TIME_LIMIT_S``
            or DEFAULT_TIME_LIMIT_S.
        lang: Language of the report and hints (``"en"``, ``"zh"``; None = the current one).

    Returns:
        The LabResult (``passed``, ``scenarios_passed``, ``scenarios_total``, ``divergence``,
        ``hint``).

    Environment (for graders): ``KVLAB_LABS_RESULTS`` names a file each call appends its result
    to (one JSON line, ``kvlab.labs.grade``); ``KVLAB_LABS_STRICT=1`` makes a failed check raise
    LabNotPassed, so an autograder (nbgrader) scores the cell 0.

    Raises:
        ValueError: For an unknown lab name or a non-positive time limit.
        LabNotPassed: Only under ``KVLAB_LABS_STRICT=1``, when the lab did not pass.
    """
    if time_limit_s is None:
        time_limit_s = float(os.environ.get("KVLAB_LABS_TIME_LIMIT_S") or DEFAULT_TIME_LIMIT_S)
    if not time_limit_s > 0:
        raise ValueError(f"time_limit_s must be > 0 seconds, got {time_limit_s!r}")
    result = run_lab(lab(name), implementation, time_limit_s=time_limit_s, seed=seed, lang=lang)
    if os.environ.get("KVLAB_LABS_RESULTS"):
        from kvlab.labs.grade import result_record

        with open(os.environ["KVLAB_LABS_RESULTS"], "a", encoding="utf-8") as f:
            f.write(json.dumps(result_record(result), ensure_ascii=False) + "\n")
    if os.environ.get("KVLAB_LABS_STRICT") == "1" and not result.passed:
        raise LabNotPassed(result)
    return result
