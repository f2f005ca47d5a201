"""A Llama-family forward in plain torch whose attention reads and writes only the paged KV cache.

One call runs a packed batch in which every sequence is a prefill, a chunk of a prefill, or a decode
(see ``kvlab.model.attention_metadata``). Per layer::

    x ──RMSNorm──► q,k,v projections ──RoPE(q,k)──► reshape_and_cache(k, v → slots) (write)
                                                  └─► paged_attention(q, block_table)  (read)
    (torch path: write_kv / paged_attention_sdpa with a plan made once per step and group)
      ◄──+── o_proj ◄────────────────────────────────┘
    x ──RMSNorm──► SwiGLU MLP ──+──► next layer

The KV cache of layer ``i`` is ``kv_caches[i]: [2, num_blocks, block_size, num_kv_heads, head_dim]``
(vLLM's FlashAttention layout): ``kv_caches[i][0]`` holds keys, ``kv_caches[i][1]`` values, and a
token at ``slot = block_id * block_size + offset`` lives at ``[:, block_id, offset]``. Nothing else
keeps keys or values between calls: run a prompt in 3 chunks and the 2nd chunk sees the 1st only
through the blocks its ``block_table`` row names.

Mirrors: vllm/model_executor/models/llama.py::LlamaForCausalLM (its forward, with
vllm/model_executor/layers/attention/attention.py::Attention). Differs: weights in a dict instead
of nn.Modules, no tensor parallelism, no CUDA graphs, no quantized matmuls (weights are
dequantized at load), and the per-layer metadata is looked up by kv_cache_group_id rather than
by layer name.

Threads: the caller owns ``torch.set_num_threads``. On small CPUs, 2 OpenMP threads showed sporadic
1-3 s stalls per step; ``torch.set_num_threads(1)`` made timings steady.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

# NOTE: imported early: without CUDA it sets TRITON_INTERPRET, which must precede importing triton
from kvlab import kernels
from kvlab.model.attention_metadata import AttentionMetadata
from kvlab.model.config import ModelConfig
from kvlab.model.layers import (
    apply_rope,
    linear,
    rms_norm,
    rope_cos_sin,
    rope_inv_freq,
    swiglu_mlp,
)
from kvlab.model.weights import check_weights, fuse_layer_weights

ATTENTION_BACKENDS = ("auto", "triton", "torch")


def default_kv_cache_group_ids(config: ModelConfig) -> list[int]:
    """Per layer, the kv_cache_group_id of its attention type: full attention first, then windows.

    ``[W, None, W, None]`` -> ``[1, 0, 1, 0]``; all full attention -> all 0.
    """
    windows = config.sliding_window or (None,) * config.num_layers
    order = sorted(set(windows), key=lambda w: (w is not None, w or 0))
    return [order.index(w) for w in windows]


def _check_group_ids(config: ModelConfig, group_ids: list[int]) -> None:
    if len(group_ids) != config.num_layers or sorted(set(group_ids)) != \
            list(range(len(set(group_ids)))):
        raise ValueError(f"kv_cache_group_ids needs {config.num_layers} entries numbered 0..G-1, "
                         f"got {group_ids}")
    windows: dict[int, int | None] = {}
    for layer, gid in enumerate(group_ids):
        window = config.layer_sliding_window(layer)
        if windows.setdefault(gid, window) != window:
            raise ValueError(f"kv_cache_group_id {gid} mixes sliding windows {windows[gid]} and "
                             f"{window} (layer {layer}); one group, one attention type")


class Model:
    """A Llama/Qwen2 decoder over kvlab's paged KV cache, easy to drive from an engine.

    Examples:
        >>> model = Model.from_pretrained(progress=False)                   # SmolLM2-135M
        >>> kv_caches = model.allocate_kv_caches(num_blocks=8, block_size=16)
        >>> ids = model.tokenizer.encode("The capital of France is")
        >>> positions, md = build_attention_metadata([[3]], [0], [len(ids)], block_size=16)
        >>> logits = model.forward(torch.tensor(ids), positions, md, kv_caches)   # (1, 49152)
        >>> model.tokenizer.decode([int(logits.argmax())])
        ' Paris'

    Attributes:
        config: the ModelConfig.
        weights: Hugging Face-named tensors (read-only by convention); a copy of the dict given,
            whose q/k/v and gate/up entries are views of ``layers``' fused tensors.
        layers: per layer, the fused weights the forward multiplies (``LayerWeights``).
        tokenizer: a ``kvlab.model.tokenizer.Tokenizer`` or None.
        attention_backend: "auto" (compiled Triton on CUDA, torch on CPU) | "triton" (on CPU: the
            Triton interpreter, slow) | "torch". The torch path checks the step's layout and plans
            its gathers once per forward (``kernels.plan_paged_attention``), then each layer does
            one ``index_copy_`` cache write and one SDPA call (``kernels.paged_attention_sdpa``).
        kv_cache_group_ids: per layer, which KV-cache group's tables it reads.

    Args (constructor):
        config, weights: from ``kvlab.model.load_model`` (or ``kvlab.model.reference``).
        tokenizer: optional Tokenizer.
        attention_backend: see Attributes.
        kv_cache_group_ids: per layer group id (0..G-1, layers of one group share one window);
            default ``default_kv_cache_group_ids(config)``. An engine passes its KVCacheConfig's.

    Raises:
        ValueError: unknown backend, bad group ids, or weights of the wrong shape.
        KeyError: missing or unexpected weights.
    """

    def __init__(self, config: ModelConfig, weights: dict[str, torch.Tensor], tokenizer=None, *,
                 attention_backend: str = "auto", kv_cache_group_ids: list[int] | None = None):
        if attention_backend not in ATTENTION_BACKENDS:
            raise ValueError(f"attention_backend must be one of {ATTENTION_BACKENDS}, got "
                             f"{attention_backend!r}")
        check_weights(config, weights)
        group_ids = default_kv_cache_group_ids(config) if kv_cache_group_ids is None \
            else list(kv_cache_group_ids)
        _check_group_ids(config, group_ids)
        self.config = config
        self.weights, self.layers = fuse_layer_weights(config, weights)
        self.tokenizer = tokenizer
        self.attention_backend = attention_backend
        self.kv_cache_group_ids = group_ids
        self.embed_tokens = weights["model.embed_tokens.weight"]               # (V, C)
        self.lm_head = weights.get("lm_head.weight", self.embed_tokens)         # (V, C)
        self.inv_freq = rope_inv_freq(config, weights.get("rope_freqs")).to(
            self.embed_tokens.device)                                           # (hs/2,)
        self.scale = config.head_dim ** -0.5

    @classmethod
    def from_pretrained(cls, source: str | Path | None = None, *,
                        dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                        progress: bool = True, attention_backend: str = "auto") -> Model:
        """Load weights and tokenizer (see ``kvlab.model.loader.load_model``); build the model."""
        from kvlab.model.loader import load_model_and_tokenizer

        config, weights, tokenizer = load_model_and_tokenizer(source, dtype=dtype, device=device,
                                                              progress=progress)
        return cls(config, weights, tokenizer, attention_backend=attention_backend)

    @property
    def dtype(self) -> torch.dtype:
        """dtype of weights and activations."""
        return self.embed_tokens.dtype

    @property
    def device(self) -> torch.device:
        """Device of the weights."""
        return self.embed_tokens.device

    def kv_cache_groups(self) -> list[tuple[int | None, list[int]]]:
        """Per kv_cache_group_id, ``(sliding_window or None, layer indices)``."""
        groups: dict[int, tuple[int | None, list[int]]] = {}
        for layer, gid in enumerate(self.kv_cache_group_ids):
            groups.setdefault(gid, (self.config.layer_sliding_window(layer), []))[1].append(layer)
        return [groups[g] for g in sorted(groups)]

    def allocate_kv_caches(self, num_blocks: int, block_size: int, dtype: torch.dtype | None = None,
                           device: str | torch.device | None = None) -> list[torch.Tensor]:
        """Zeroed per-layer caches ``[2, num_blocks, block_size, num_kv_heads, head_dim]``.

        Each layer gets its own tensor (vLLM shares one tensor between layers of different groups
        in hybrid models; kvlab keeps them apart for clarity). Size:
        ``num_blocks * block_size * config.kv_cache_bytes_per_token(itemsize)`` bytes.

        Args:
            num_blocks: blocks per layer (blocks), block 0 included (the null block in vLLM).
            block_size: tokens per block (tokens).
            dtype: cache dtype; default the model's.
            device: default the model's.

        Raises:
            ValueError: a non-positive count.
        """
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError(f"num_blocks and block_size must be positive, got {num_blocks}, "
                             f"{block_size}")
        shape = (2, num_blocks, block_size, self.config.num_kv_heads, self.config.head_dim)
        return [torch.zeros(shape, dtype=dtype or self.dtype, device=device or self.device)
                for _ in range(self.config.num_layers)]

    def _check_inputs(self, input_ids: torch.Tensor, positions: torch.Tensor,
                      attn_metadata: AttentionMetadata, kv_caches: list[torch.Tensor]) -> None:
        c = self.config
        if input_ids.dim() != 1 or input_ids.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"input_ids must be a 1-D int tensor [num_tokens], got "
                            f"{input_ids.dtype} {tuple(input_ids.shape)}")
        if positions.shape != input_ids.shape or attn_metadata.num_tokens != input_ids.shape[0]:
            raise ValueError(f"input_ids {tuple(input_ids.shape)}, positions "
                             f"{tuple(positions.shape)} and slot_mapping "
                             f"({attn_metadata.num_tokens},) must have the same length")
        if len(kv_caches) != c.num_layers:
            raise ValueError(f"kv_caches needs one tensor per layer ({c.num_layers}), got "
                             f"{len(kv_caches)}")
        shape = kv_caches[0].shape
        if kv_caches[0].dim() != 5 or shape[0] != 2 or shape[3:] != (c.num_kv_heads, c.head_dim):
            raise ValueError(f"kv_caches[i] must be [2, num_blocks, block_size, {c.num_kv_heads}, "
                             f"{c.head_dim}], got {tuple(shape)}")
        first = kv_caches[0]
        for i, kv in enumerate(kv_caches):
            if kv.shape != shape or kv.dtype != first.dtype or kv.device != first.device \
                    or not kv.is_contiguous() or not kv.is_floating_point():
                raise ValueError(f"kv_caches[{i}] must be a contiguous floating tensor like "
                                 f"kv_caches[0] ({tuple(shape)}, {first.dtype}, {first.device}), "
                                 f"got {tuple(kv.shape)}, {kv.dtype}, {kv.device}")

    def _uses_torch_attention(self) -> bool:
        """True when attention runs on the batched torch path (CPU "auto", or "torch")."""
        backend = self.attention_backend
        return backend == "torch" or (backend == "auto" and self.device.type != "cuda")

    def _plan_step(self, attn_metadata: AttentionMetadata,
                   kv_caches: list[torch.Tensor]) -> list[kernels.PagedAttentionPlan]:
        """Per kv_cache_group_id, the step's checked gather/write plan (shared by its layers)."""
        _, num_blocks, block_size = kv_caches[0].shape[:3]
        group = self.config.num_q_heads // self.config.num_kv_heads
        plans = []
        for gid, (window, _) in enumerate(self.kv_cache_groups()):
            slot_mapping, block_table = attn_metadata.tables_for_group(gid)
            plans.append(kernels.plan_paged_attention(
                block_table, attn_metadata.seq_lens, attn_metadata.query_start_loc,
                block_size=block_size, num_blocks=num_blocks, num_queries_per_kv=group,
                sliding_window=window, slot_mapping=slot_mapping))
        return plans

    def _attention(self, layer: int, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   attn_metadata: AttentionMetadata, kv_cache: torch.Tensor,
                   plan: kernels.PagedAttentionPlan | None) -> torch.Tensor:
        c, lw = self.config, self.layers[layer]
        num_tokens, nq, nkv = x.shape[0], c.num_q_heads, c.num_kv_heads
        qkv = linear(x, lw.qkv_proj, lw.qkv_bias)                       # (T, (nq + 2 nkv) * hs)
        qkv = qkv.view(num_tokens, nq + 2 * nkv, c.head_dim)            # (T, nq + 2 nkv, hs)
        qk = apply_rope(qkv[:, :nq + nkv], cos, sin)                    # (T, nq + nkv, hs)
        q, k, v = qk[:, :nq], qk[:, nq:], qkv[:, nq + nkv:]             # (T, nq|nkv|nkv, hs)
        key_cache, value_cache = kv_cache[0], kv_cache[1]  # (num_blocks, block_size, nkv, hs) x2
        if q.dtype != key_cache.dtype:
            q, k, v = q.to(key_cache.dtype), k.to(key_cache.dtype), v.to(key_cache.dtype)
        if plan is not None:  # batched torch path: checked once per step in _plan_step
            kernels.write_kv(plan, k, v, key_cache, value_cache)
            out = kernels.paged_attention_sdpa(q, key_cache, value_cache, plan,
                                               scale=self.scale)                  # (T, nq, hs)
        else:
            slot_mapping, block_table = attn_metadata.tables_for_group(
                self.kv_cache_group_ids[layer])
            q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
            kernels.reshape_and_cache(k, v, key_cache, value_cache, slot_mapping,
                                      backend=self.attention_backend)
            out = kernels.paged_attention(
                q, key_cache, value_cache, block_table, attn_metadata.seq_lens,
                attn_metadata.query_start_loc, scale=self.scale,
                sliding_window=c.layer_sliding_window(layer), backend=self.attention_backend,
                max_query_len=attn_metadata.max_query_len, max_seq_len=attn_metadata.max_seq_len,
            )                                                                      # (T, nq, hs)
        out = out.to(x.dtype).reshape(num_tokens, nq * c.head_dim)                 # (T, nq * hs)
        return linear(out, lw.o_proj)                                              # (T, C)

    def _decoder_layer(self, layer: int, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                       attn_metadata: AttentionMetadata, kv_cache: torch.Tensor,
                       plan: kernels.PagedAttentionPlan | None) -> torch.Tensor:
        lw, eps = self.layers[layer], self.config.rms_norm_eps
        x = rms_norm(h, lw.input_layernorm, eps)                                  # (T, C)
        h = h + self._attention(layer, x, cos, sin, attn_metadata, kv_cache, plan)  # (T, C)
        x = rms_norm(h, lw.post_attention_layernorm, eps)                         # (T, C)
        return h + swiglu_mlp(x, lw.gate_up_proj, lw.down_proj)                   # (T, C)

    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor,
                attn_metadata: AttentionMetadata, kv_caches: list[torch.Tensor], *,
                return_all_logits: bool = False) -> torch.Tensor:
        """Run one packed batch through the model, writing its keys/values into ``kv_caches``.

        Args:
            input_ids: [num_tokens] int token ids, every sequence's new tokens back to back.
            positions: [num_tokens] int position of each token in its sequence (tokens).
            attn_metadata: where the tokens' slots and the sequences' blocks are.
            kv_caches: per layer ``[2, num_blocks, block_size, num_kv_heads, head_dim]``, written in
                place at ``attn_metadata``'s slots.
            return_all_logits: False = logits of each sequence's last new token; True = of every
                token.

        Returns:
            float32 logits, [num_seqs, vocab_size] (or [num_tokens, vocab_size]).

        Raises:
            TypeError, ValueError: inputs of the wrong dtype, shape or length (nothing is written).
        """
        self._check_inputs(input_ids, positions, attn_metadata, kv_caches)
        plans = self._plan_step(attn_metadata, kv_caches) if self._uses_torch_attention() else None
        cos, sin = rope_cos_sin(positions, self.inv_freq, self.dtype)  # (T, 1, hs) x2
        h = F.embedding(input_ids, self.embed_tokens)                  # (T, C)
        for layer, gid in enumerate(self.kv_cache_group_ids):
            plan = None if plans is None else plans[gid]
            h = self._decoder_layer(layer, h, cos, sin, attn_metadata, kv_caches[layer],
                                    plan)                              # (T, C)
        if not return_all_logits:
            last = attn_metadata.query_start_loc[1:].long() - 1        # (S,)
            h = h[last]                                                 # (S, C)
        h = rms_norm(h, self.weights["model.norm.weight"], self.config.rms_norm_eps)
        return linear(h, self.lm_head).float()                         # (S | T, V)

    __call__ = forward
