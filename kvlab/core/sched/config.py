"""The scheduler's knobs: batch size, token budget, chunked prefill, model length.

Mirrors: the fields of vllm.config.SchedulerConfig (plus ``max_model_len`` from ModelConfig
and the prefix-caching / stats switches from CacheConfig and the engine) that
vllm/v1/core/sched/scheduler.py::Scheduler reads for KV-cache-relevant scheduling.
Left out: the priority policy (kvlab schedules first-come-first-served only), async
scheduling, speculative decoding, encoder budgets, LoRA limits.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SchedulerConfig"]


@dataclass(frozen=True)
class SchedulerConfig:
    """Limits of one scheduling step.

    Examples:
        >>> cfg = SchedulerConfig(max_num_seqs=4, max_num_batched_tokens=32, max_model_len=256)
        >>> cfg.max_num_scheduled_tokens
        32

    Attributes:
        max_num_seqs: Most requests in the running queue at once (requests).
        max_num_batched_tokens: Token budget of one step, summed over requests (tokens).
        max_model_len: Longest sequence, prompt + output (tokens).
        enable_chunked_prefill: If False, a waiting request whose remaining prompt does not
            fit the step's leftover budget stops admission for the step (it is never split).
        long_prefill_token_threshold: If > 0, no request gets more than this many tokens in
            one step (tokens); 0 = no cap.
        scheduler_reserve_full_isl: Admit a waiting request only if its whole current
            sequence fits in the free blocks, not just its first chunk
            (``allocate_slots(..., full_sequence_must_fit=True)``); vLLM 0.22.1's default.
        enable_prefix_caching: Passed to the KVCacheManager built from a KVCacheConfig.
        log_stats: Collect prefix-cache stats (``make_stats``) each step.
        policy: Only "fcfs".

    Raises:
        ValueError: On a non-positive size, a negative threshold, or an unknown policy.
    """

    max_num_seqs: int = 128
    max_num_batched_tokens: int = 2048
    max_model_len: int = 8192
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    scheduler_reserve_full_isl: bool = True
    enable_prefix_caching: bool = True
    log_stats: bool = False
    policy: str = "fcfs"

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        threshold = self.long_prefill_token_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ValueError(
                f"long_prefill_token_threshold must be an int >= 0 (0 = off), got {threshold!r}"
            )
        if self.policy != "fcfs":
            raise ValueError(
                f"policy must be 'fcfs' (priority scheduling is left out), got {self.policy!r}"
            )

    @property
    def max_num_scheduled_tokens(self) -> int:
        """The per-step token budget the scheduler spends (tokens).

        Mirrors ``Scheduler.max_num_scheduled_tokens`` (vLLM lets a separate setting lower
        it below ``max_num_batched_tokens``; kvlab uses one number).
        """
        return self.max_num_batched_tokens
