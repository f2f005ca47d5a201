"""The few engine settings the KV-cache specs and the block-count sizing read.

Mirrors: the fields of vllm.config.VllmConfig that vllm/v1/kv_cache_interface.py and the
sizing half of vllm/v1/core/kv_cache_utils.py read. vLLM nests them
(``vllm_config.model_config.max_model_len``, ``.scheduler_config.max_num_batched_tokens``, ...);
kvlab keeps one flat dataclass and exposes ``model_config``, ``scheduler_config``,
``parallel_config`` and ``cache_config`` as properties returning the object itself, so code
written against vLLM's nested paths works on it unchanged (and so does a real VllmConfig).

Examples:
    >>> cfg = VllmConfig(max_model_len=4096, max_num_batched_tokens=2048)
    >>> cfg.model_config.max_model_len, cfg.scheduler_config.max_num_batched_tokens
    (4096, 2048)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VllmConfig"]


@dataclass
class VllmConfig:
    """Flat stand-in for vllm.config.VllmConfig (only what KV-cache sizing reads).

    Attributes:
        max_model_len: Longest sequence a request may reach (tokens).
        max_num_batched_tokens: Token budget of one scheduler step (tokens).
        max_num_encoder_input_tokens: Encoder budget, read by CrossAttentionSpec (tokens).
        block_size: cache_config.block_size (tokens per block).
        enable_prefix_caching: cache_config.enable_prefix_caching.
        hash_block_size: cache_config.hash_block_size override (tokens) or None.
        num_gpu_blocks_override: If set, replaces the computed num_blocks (blocks).
        mamba_cache_mode: cache_config.mamba_cache_mode: "none", "align" or "all".
        decode_context_parallel_size: DCP world size (1 = off).
        prefill_context_parallel_size: PCP world size (1 = off).
        kv_transfer_config: None unless a KV connector is configured.
        original_max_model_len: model_config's max_model_len as the user gave it; -1 asks
            get_kv_cache_configs to auto-fit max_model_len to the memory (None: as given).
        disable_hybrid_kv_cache_manager: scheduler_config's switch: unify local-attention
            layers into full attention before grouping (unify_hybrid_kv_cache_specs).
        speculative_config: None, or an object with ``use_eagle()`` (read when grouping
            DeepseekV4 layers).

    Raises:
        ValueError: On construction, if a size is not positive or mamba_cache_mode is unknown.
    """

    max_model_len: int = 8192
    max_num_batched_tokens: int = 2048
    max_num_encoder_input_tokens: int = 0
    block_size: int = 16
    enable_prefix_caching: bool = True
    hash_block_size: int | None = None
    num_gpu_blocks_override: int | None = None
    mamba_cache_mode: str = "none"
    decode_context_parallel_size: int = 1
    prefill_context_parallel_size: int = 1
    kv_transfer_config: object | None = None
    original_max_model_len: int | None = None
    disable_hybrid_kv_cache_manager: bool = False
    speculative_config: object | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_model_len",
            "max_num_batched_tokens",
            "block_size",
            "decode_context_parallel_size",
            "prefill_context_parallel_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.mamba_cache_mode not in ("none", "align", "all"):
            raise ValueError(
                f"mamba_cache_mode must be 'none', 'align' or 'all', got {self.mamba_cache_mode!r}"
            )

    @property
    def model_config(self) -> VllmConfig:
        """vLLM's ``model_config`` (here: self; reads ``max_model_len``)."""
        return self

    @property
    def scheduler_config(self) -> VllmConfig:
        """vLLM's ``scheduler_config`` (here: self)."""
        return self

    @property
    def parallel_config(self) -> VllmConfig:
        """vLLM's ``parallel_config`` (here: self)."""
        return self

    @property
    def cache_config(self) -> VllmConfig:
        """vLLM's ``cache_config`` (here: self)."""
        return self
