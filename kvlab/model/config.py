"""ModelConfig: the architecture facts the paged forward needs, read from a GGUF or a config.json.

Both loaders turn their own metadata into this one dataclass, so ``kvlab.model.llama`` never
looks at file formats. Field names follow Hugging Face's ``LlamaConfig`` where one exists
(``num_layers`` is ``num_hidden_layers``; ``num_q_heads`` is ``num_attention_heads``).

Examples:
    SmolLM2-135M-Instruct:

    ```python
    ModelConfig(architecture="llama", num_layers=30, hidden_size=576, num_q_heads=9,
                num_kv_heads=3, head_dim=64, intermediate_size=1536, rope_theta=100000.0,
                rms_norm_eps=1e-05, vocab_size=49152, max_position_embeddings=8192,
                tie_word_embeddings=True, bos_token_id=1, eos_token_ids=(2,))
    ```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SUPPORTED_ARCHITECTURES = ("llama", "qwen2")


@dataclass(frozen=True)
class RopeScaling:
    """Llama-3 style RoPE frequency scaling (``rope_type="llama3"``) or linear position scaling.

    Attributes:
        rope_type: "llama3" | "linear".
        factor: scaling factor.
        low_freq_factor: llama3 only.
        high_freq_factor: llama3 only.
        original_max_position_embeddings: llama3 only (tokens).
    """

    rope_type: str
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a Llama-family decoder (Llama, SmolLM, Qwen2, Mistral-style windows).

    Attributes:
        architecture: "llama" | "qwen2" (Qwen2 = Llama + q/k/v biases).
        num_layers: decoder layers.
        hidden_size: model width (elements).
        num_q_heads: query heads.
        num_kv_heads: key/value heads (GQA when fewer than ``num_q_heads``).
        head_dim: elements per head.
        intermediate_size: SwiGLU MLP width (elements).
        rope_theta: RoPE base frequency.
        rms_norm_eps: RMSNorm epsilon.
        vocab_size: rows of the embedding (tokens).
        max_position_embeddings: context length the model was trained for (tokens).
        tie_word_embeddings: lm_head reuses the embedding matrix.
        bos_token_id: begin-of-sequence id, or None.
        eos_token_ids: ids that end generation (tokens).
        sliding_window: per-layer window (tokens; None = full attention), or None when every layer
            is full attention. A list like ``[W, None, W, None]`` describes a Gemma-3-like hybrid.
        attention_bias: q/k/v projections carry biases (Qwen2: True).
        rope_scaling: optional RoPE scaling.
    """

    architecture: str
    num_layers: int
    hidden_size: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    sliding_window: tuple[int | None, ...] | None = None
    attention_bias: bool = False
    rope_scaling: RopeScaling | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.architecture not in SUPPORTED_ARCHITECTURES:
            raise ValueError(f"architecture {self.architecture!r} not supported; allowed: "
                             f"{', '.join(SUPPORTED_ARCHITECTURES)}")
        for name in ("num_layers", "hidden_size", "num_q_heads", "num_kv_heads", "head_dim",
                     "intermediate_size", "vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.num_q_heads % self.num_kv_heads:
            raise ValueError(f"num_q_heads ({self.num_q_heads}) must be a multiple of "
                             f"num_kv_heads ({self.num_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.sliding_window is not None:
            windows = tuple(self.sliding_window)
            object.__setattr__(self, "sliding_window", windows)
            if len(windows) != self.num_layers:
                raise ValueError(f"sliding_window needs one entry per layer ({self.num_layers}), "
                                 f"got {len(windows)}")
            if any(w is not None and (not isinstance(w, int) or w <= 0) for w in windows):
                raise ValueError(f"sliding_window entries must be None or positive ints, got "
                                 f"{windows}")
        object.__setattr__(self, "eos_token_ids", tuple(self.eos_token_ids))

    def layer_sliding_window(self, layer_idx: int) -> int | None:
        """Window (tokens) of layer ``layer_idx``, or None for full attention."""
        if not 0 <= layer_idx < self.num_layers:
            raise ValueError(f"layer_idx must lie in [0, {self.num_layers}), got {layer_idx}")
        return None if self.sliding_window is None else self.sliding_window[layer_idx]

    @property
    def num_queries_per_kv(self) -> int:
        """GQA group size: query heads sharing one KV head."""
        return self.num_q_heads // self.num_kv_heads

    def kv_cache_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V one token occupies across all layers (bytes)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes


def rope_scaling_from_dict(raw: dict[str, Any] | None) -> RopeScaling | None:
    """Parse a config.json ``rope_scaling``/``rope_parameters`` dict.

    Raises:
        ValueError: a rope type other than default, "llama3" or "linear".
    """
    if not raw:
        return None
    rope_type = raw.get("rope_type", raw.get("type", "default"))
    if rope_type == "default":
        return None
    if rope_type == "linear":
        return RopeScaling("linear", float(raw["factor"]))
    if rope_type == "llama3":
        return RopeScaling("llama3", float(raw["factor"]), float(raw["low_freq_factor"]),
                           float(raw["high_freq_factor"]),
                           int(raw["original_max_position_embeddings"]))
    raise ValueError(f"rope scaling type {rope_type!r} not supported; allowed: default, linear, "
                     "llama3")
