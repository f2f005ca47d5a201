"""GPU memory in, blocks out: how vLLM 0.22.1 sizes the KV cache of a model, in bytes.

A what-if asked in bytes ("16 GiB of KV cache for Llama-3.1-8B") becomes a pool of blocks the
way vLLM makes it:

1. one KV-cache spec per layer, from the model's Hugging Face ``config.json`` as vLLM's model
   code builds them: ``FullAttentionSpec`` (dense and GQA), ``MLAAttentionSpec`` (DeepSeek's
   latent: one ``kv_lora_rank + qk_rope_head_dim`` vector per token), ``SlidingWindowSpec``
   (Gemma-3's local layers), ``MambaSpec`` (Jamba's Mamba-1 states);
2. kvlab.core's mirror of ``get_kv_cache_configs`` (``kvlab.core.kv_cache_utils``): the groups
   (one per attention type, page sizes unified), ``num_blocks = memory // page_size //
   group_size``, the check that one ``max_model_len`` request fits.

Block sizes are vLLM's on an H100: 16 tokens (FlashAttention), 64 for MLA (FlashMLA's only
size); for a Mamba hybrid the attention block grows until one attention page holds a Mamba state
(``Platform._align_hybrid_block_size`` in "align" mode, what vLLM picks for Mamba-1 with prefix
caching on: 80 tokens for Jamba), and the Mamba page is padded to it. ``--block-size`` overrides
the default (not the hybrid alignment, as in vLLM).

The memory: ``--kv-cache-memory`` is vLLM's ``kv_cache_memory_bytes`` (the pool itself);
``--gpu-memory`` with ``--gpu-memory-utilization`` (default 0.9) gives
``gpu_memory * utilization - weights``, where ``weights`` is everything vLLM's profiler counts
outside the KV cache. Its default is the parameters times their dtype size (the bundled configs
carry the parameter count); activations, CUDA graphs and NCCL buffers are not modelled, so pass
``--weights`` with the "model weights took ... GiB" plus "non-KV memory" that ``vllm serve``
logs for an exact match.

Bundled configs (``BUNDLED_MODELS``, JSON files in ``kvlab/traffic/models``) cover the five
shapes that size differently: ``llama-2-7b`` (dense), ``llama-3.1-8b`` (GQA),
``deepseek-v2-lite`` (MLA), ``gemma-3-12b`` (sliding-window hybrid) and ``jamba-v0.1`` (Mamba
hybrid). Tensor parallelism is 1 (one GPU's pool).

Examples:
    >>> s = size_kv_cache(load_model_config("llama-3.1-8b"), parse_bytes("16GiB"))
    >>> s.block_size, s.num_gpu_blocks, s.page_size_bytes
    (16, 8192, 65536)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvlab.i18n import _

__all__ = [
    "BUNDLED_MODELS",
    "KVCacheSizing",
    "kv_cache_budgets",
    "layer_specs",
    "load_model_config",
    "parse_bytes",
    "size_kv_cache",
]

_MODELS_DIR = Path(__file__).with_name("models")
BUNDLED_MODELS = tuple(sorted(p.stem for p in _MODELS_DIR.glob("*.json")))
"""Names ``--model-config`` accepts besides a path to a config.json."""

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # fmt: skip
_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float8": 1, "fp8": 1}


def parse_bytes(text: str) -> int:
    """``"16GiB"`` -> 17179869184; units B, KB, MB, GB, TB (powers of 10), KiB ... TiB (of 2).

    Raises:
        ValueError: Naming the text and the units allowed.
    """
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(_("{text} is not a size; allowed: a number with B, KB, MB, GB, TB, "
                           "KiB, MiB, GiB or TiB (16GiB, 80GB, 1.5e9)").format(text=repr(text)))
    return int(float(m.group(1)) * _UNITS[unit])


def load_model_config(name_or_path: str | Path) -> dict[str, Any]:
    """A bundled config (``BUNDLED_MODELS``) or a Hugging Face config.json, as a dict.

    A multimodal config's ``text_config`` is used (Gemma-3). The dict gets ``_name`` (the
    bundled name or the file's folder name).

    Raises:
        ValueError: Naming the bundled models when the name is neither one nor a file, or
            when the file is not a JSON object.
    """
    text = str(name_or_path)
    path = _MODELS_DIR / f"{text}.json" if text in BUNDLED_MODELS else Path(text)
    if not path.is_file():
        msg = _("no model config {name}: give a config.json path or one of {models}")
        raise ValueError(msg.format(name=repr(text), models=", ".join(BUNDLED_MODELS)))
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        msg = _("{path}: not JSON ({problem})")
        raise ValueError(msg.format(path=path, problem=exc.msg)) from None
    if not isinstance(cfg, dict):
        msg = _("{path}: expected a JSON object (a Hugging Face config.json)")
        raise ValueError(msg.format(path=path))
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "num_parameters": cfg.get("num_parameters"),
               "torch_dtype": cfg["text_config"].get("torch_dtype", cfg.get("torch_dtype"))}
    cfg["_name"] = text if text in BUNDLED_MODELS else path.parent.name or path.stem
    return cfg


def _get(cfg: dict, key: str, default: Any = None) -> Any:
    v = cfg.get(key, default)
    if v is None:
        msg = _("model config {name} lacks {key}")
        raise ValueError(msg.format(name=repr(cfg.get("_name")), key=repr(key)))
    return v


def _dtype(cfg: dict) -> str:
    name = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    if name not in _DTYPE_BYTES:
        raise ValueError(_("unknown torch_dtype {name}; allowed: {allowed}").format(
            name=repr(name), allowed=", ".join(_DTYPE_BYTES)))
    return name


def _attention_layout(cfg: dict) -> tuple[int, int]:
    heads = _get(cfg, "num_attention_heads")
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or _get(cfg, "hidden_size") // heads
    return kv_heads, head_dim


def layer_specs(cfg: dict, block_size: int | None = None) -> tuple[dict[str, Any], str]:
    """Per layer (``model.layers.<i>``) the KV-cache spec vLLM builds for it.

    Args:
        cfg: ``load_model_config``'s dict.
        block_size: Attention block size (tokens); None = vLLM's default for the model.

    Returns:
        (layer name -> kvlab.core spec, mamba_cache_mode: "align" for a Mamba hybrid, else
        "none").

    Raises:
        ValueError: A model type kvlab cannot size (naming the ones it can), or a config
            lacking a field it needs.
    """
    from kvlab.core import FullAttentionSpec, MambaSpec, MLAAttentionSpec, SlidingWindowSpec

    dtype, n = _dtype(cfg), _get(cfg, "num_hidden_layers")
    kind = cfg.get("model_type", "")
    if cfg.get("kv_lora_rank"):  # NOTE: DeepSeek-V2/V3 and friends: MLA
        head = _get(cfg, "kv_lora_rank") + _get(cfg, "qk_rope_head_dim")
        spec = MLAAttentionSpec(block_size=block_size or 64, num_kv_heads=1, head_size=head,
                                dtype=dtype)  # fmt: skip
        return {f"model.layers.{i}": spec for i in range(n)}, "none"
    kv_heads, head_dim = _attention_layout(cfg)
    if kind == "jamba":
        return _jamba_specs(cfg, block_size, dtype, kv_heads, head_dim), "align"
    full = FullAttentionSpec(block_size=block_size or 16, num_kv_heads=kv_heads,
                             head_size=head_dim, dtype=dtype)  # fmt: skip
    window = cfg.get("sliding_window")
    types = cfg.get("layer_types")
    if window and not types:
        pattern = cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")
        types = ["full_attention" if pattern and (i + 1) % pattern == 0 else "sliding_attention"
                 for i in range(n)]  # fmt: skip
    if types is None:
        if kind not in ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text"):
            raise ValueError(_("cannot size model_type {kind}: kvlab knows dense / GQA "
                               "attention (llama, mistral, qwen2, qwen3), MLA (kv_lora_rank), "
                               "sliding windows (sliding_window, layer_types) and jamba"
                               ).format(kind=repr(kind)))
        return {f"model.layers.{i}": full for i in range(n)}, "none"
    sliding = SlidingWindowSpec(block_size=block_size or 16, num_kv_heads=kv_heads,
                                head_size=head_dim, dtype=dtype, sliding_window=window)  # fmt: skip
    return {f"model.layers.{i}": sliding if t == "sliding_attention" else full
            for i, t in enumerate(types[:n])}, "none"  # fmt: skip


def _jamba_specs(cfg: dict, block_size: int | None, dtype: str, kv_heads: int,
                 head_dim: int) -> dict[str, Any]:  # fmt: skip
    """Jamba: attention every ``attn_layer_period`` layers, Mamba-1 elsewhere; the attention
    block aligned to hold one Mamba state (vLLM's ``_align_hybrid_block_size``, "align")."""
    from kvlab.core import FullAttentionSpec, MambaSpec

    period, offset = _get(cfg, "attn_layer_period"), _get(cfg, "attn_layer_offset")
    inner = _get(cfg, "mamba_expand") * _get(cfg, "hidden_size")
    shapes = ((inner, _get(cfg, "mamba_d_conv") - 1), (inner, _get(cfg, "mamba_d_state")))
    size = _DTYPE_BYTES[dtype]
    mamba_page = sum(a * b * size for a, b in shapes)
    per_token = FullAttentionSpec(block_size=1, num_kv_heads=kv_heads, head_size=head_dim,
                                  dtype=dtype).page_size_bytes  # fmt: skip
    kernel = max(16, block_size or 16)  # NOTE: FlashAttention's kernel block alignment
    bs = max(block_size or 16, kernel * -(-mamba_page // (kernel * per_token)))
    attn = FullAttentionSpec(block_size=bs, num_kv_heads=kv_heads, head_size=head_dim, dtype=dtype)
    mamba = MambaSpec(block_size=bs, shapes=shapes, dtypes=(dtype, dtype),
                      page_size_padded=attn.page_size_bytes, mamba_type="MAMBA1",
                      mamba_cache_mode="align")  # fmt: skip
    n = _get(cfg, "num_hidden_layers")
    return {f"model.layers.{i}": attn if i % period == offset else mamba for i in range(n)}


@dataclass
class KVCacheSizing:
    """One model at one KV-cache budget, sized as vLLM sizes it.

    Attributes:
        model: The config's name.
        kv_cache_memory_bytes: The budget (bytes).
        kv_cache_config: kvlab.core's KVCacheConfig (what get_kv_cache_configs returned).
        max_model_len: The max_model_len checked (tokens).
    """

    model: str
    kv_cache_memory_bytes: int
    kv_cache_config: Any
    max_model_len: int

    @property
    def num_gpu_blocks(self) -> int:
        """vLLM's ``num_gpu_blocks`` (blocks; its null block is one of them)."""
        return self.kv_cache_config.num_blocks

    @property
    def groups(self) -> list[Any]:
        """The KVCacheGroupSpecs."""
        return self.kv_cache_config.kv_cache_groups

    @property
    def block_size(self) -> int:
        """Tokens per block of the first group (all groups share it here) (tokens)."""
        return self.groups[0].kv_cache_spec.block_size

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of one layer slot (bytes)."""
        return self.groups[0].kv_cache_spec.page_size_bytes

    @property
    def is_hybrid(self) -> bool:
        """Several groups (sliding window, Mamba): replayed through kvlab.core exactly."""
        return len(self.groups) > 1

    @property
    def capacity_tokens(self) -> int:
        """Tokens of prompt one group's usable blocks hold: ``(num_gpu_blocks - 1) //
        len(groups) * block_size`` (tokens); for one group, the pool of the what-if."""
        return (self.num_gpu_blocks - 1) // len(self.groups) * self.block_size

    def describe(self) -> str:
        """One line: groups, block size, page size, blocks."""
        kinds = ", ".join(f"{type(g.kv_cache_spec).__name__} x{len(g.layer_names)}"
                          for g in self.groups)  # fmt: skip
        return (f"{self.model}: {self.kv_cache_memory_bytes / 2**30:.2f} GiB -> "
                f"{self.num_gpu_blocks:,} blocks of {self.block_size} tokens ({kinds}; page "
                f"{self.page_size_bytes:,} B)")


def size_kv_cache(cfg: dict, kv_cache_memory_bytes: int, max_model_len: int | None = None,
                  block_size: int | None = None) -> KVCacheSizing:  # fmt: skip
    """Size ``cfg``'s pool for one budget through kvlab.core.get_kv_cache_configs.

    Args:
        cfg: ``load_model_config``'s dict.
        kv_cache_memory_bytes: The KV cache budget (bytes), > 0.
        max_model_len: Checked to fit (tokens); None = the config's max_position_embeddings.
        block_size: Attention block size (tokens); None = vLLM's default for the model.

    Returns:
        The KVCacheSizing.

    Raises:
        ValueError: As ``layer_specs``; or the budget cannot hold one max_model_len request
            (vLLM's own message, with the largest max_model_len that fits).
    """
    from kvlab.core import VllmConfig, get_kv_cache_configs

    if kv_cache_memory_bytes <= 0:
        msg = _("the KV cache budget must be > 0 bytes, got {n}")
        raise ValueError(msg.format(n=kv_cache_memory_bytes))
    specs, mode = layer_specs(cfg, block_size)
    first = next(iter(specs.values()))
    mml = max_model_len or int(_get(cfg, "max_position_embeddings"))
    vc = VllmConfig(max_model_len=mml, block_size=first.block_size, mamba_cache_mode=mode,
                    max_num_batched_tokens=8192)  # fmt: skip
    kv = get_kv_cache_configs(vc, [specs], [int(kv_cache_memory_bytes)])[0]
    return KVCacheSizing(cfg["_name"], int(kv_cache_memory_bytes), kv, mml)


def kv_cache_budgets(cfg: dict, kv_cache_memory: list[int] | None = None,
                     gpu_memory: list[int] | None = None, utilization: float = 0.9,
                     weights_bytes: int | None = None) -> list[int]:  # fmt: skip
    """The KV-cache budgets (bytes) asked for: given directly and/or from GPU sizes.

    Raises:
        ValueError: A utilization outside (0, 1], no budget at all, weights unknown (a
            config without num_parameters and no ``weights_bytes``), or a GPU too small.
    """
    out = list(kv_cache_memory or [])
    if not 0 < utilization <= 1:
        msg = _("gpu_memory_utilization must be in (0, 1], got {value}")
        raise ValueError(msg.format(value=utilization))
    if gpu_memory:
        if weights_bytes is None:
            params = cfg.get("num_parameters")
            if not params:
                msg = _("model config {name} has no num_parameters: give the weights' size "
                        "(--weights 16GiB)")
                raise ValueError(msg.format(name=repr(cfg.get("_name"))))
            weights_bytes = int(params) * _DTYPE_BYTES[_dtype(cfg)]
        for g in gpu_memory:
            free = int(g * utilization) - weights_bytes
            if free <= 0:
                msg = _("{gpu} GiB x {utilization} leaves nothing after {weights} GiB of weights")
                raise ValueError(msg.format(gpu=f"{g / 2**30:.1f}", utilization=utilization,
                                            weights=f"{weights_bytes / 2**30:.1f}"))  # fmt: skip
            out.append(free)
    if not out:
        raise ValueError(_("no KV cache budget: give --kv-cache-memory and/or --gpu-memory"))
    return out
