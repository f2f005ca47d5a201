"""Sampling parameters and the sampler of kvlab's engine.

Mirrors: vllm/sampling_params.py::SamplingParams (the fields kvlab's engine uses) and
vllm/v1/sample/sampler.py (greedy, temperature, top-k, top-p; no penalties, no logprobs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from kvlab.core.request_params import SamplingParams as _CoreSamplingParams

__all__ = ["SamplingParams", "sample"]


@dataclass
class SamplingParams(_CoreSamplingParams):
    """How to pick the next token, and when to stop.

    Examples:
        >>> SamplingParams(max_tokens=8).temperature     # greedy by default
        0.0

    Attributes:
        max_tokens: Most tokens to generate (tokens).
        temperature: 0 = greedy (argmax); > 0 divides the logits before sampling.
        top_k: Keep the k most likely tokens (0 = all).
        top_p: Keep the smallest set of tokens whose probability reaches top_p (1 = all).
        seed: Per-request random seed (None: derived from the request id).
        stop_token_ids: Tokens that end the request (kept in the output).
        ignore_eos: Keep generating past the tokenizer's eos token.
        min_tokens: Never stop before this many tokens (tokens).
        eos_token_id: Filled from the tokenizer by the engine unless ``ignore_eos``.

    Raises:
        ValueError: A negative temperature or top_k, or top_p outside (0, 1].
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    eos_token_id: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = all tokens), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {self.top_p}")
        self.stop_token_ids = tuple(int(t) for t in self.stop_token_ids)

    def for_tokenizer(self, tokenizer: Any) -> SamplingParams:
        """A copy with ``eos_token_id`` taken from ``tokenizer`` (unless ignore_eos or already set)."""
        if self.ignore_eos or self.eos_token_id is not None or tokenizer is None:
            return replace(self)
        return replace(self, eos_token_id=tokenizer.eos_token_id)


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None) -> int:
    """Pick one token from one sequence's logits.

    Args:
        logits: [vocab_size] float logits of the last position.
        params: The request's sampling parameters.
        generator: CPU random generator (needed when ``temperature > 0``).

    Returns:
        The token id.
    """
    if params.temperature == 0:
        return int(torch.argmax(logits))
    logits = logits.float().cpu() / params.temperature                       # (V,)
    if params.top_k:
        kth = torch.topk(logits, min(params.top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)                                    # (V,)
    if params.top_p < 1:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < params.top_p          # (V,) always keeps the first
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=generator))
