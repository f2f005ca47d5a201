"""The weight names and shapes a Llama-family ModelConfig implies, a check of a loaded dict, and
the per-layer fused view the forward multiplies with.

Names are Hugging Face's (``model.layers.{i}.self_attn.q_proj.weight``); both loaders produce them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.model.config import ModelConfig

OPTIONAL_NAMES = ("lm_head.weight", "rope_freqs")


def expected_weight_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every weight the forward reads, with its shape ``[out_features, in_features]``.

    ``lm_head.weight`` is listed only when the embeddings are not tied; q/k/v biases only when
    ``config.attention_bias``.
    """
    c, hs = config.hidden_size, config.head_dim
    q_out, kv_out = config.num_q_heads * hs, config.num_kv_heads * hs
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (config.vocab_size, c),
        "model.norm.weight": (c,),
    }
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, c)
    for i in range(config.num_layers):
        p = f"model.layers.{i}."
        shapes |= {
            p + "input_layernorm.weight": (c,),
            p + "self_attn.q_proj.weight": (q_out, c),
            p + "self_attn.k_proj.weight": (kv_out, c),
            p + "self_attn.v_proj.weight": (kv_out, c),
            p + "self_attn.o_proj.weight": (c, q_out),
            p + "post_attention_layernorm.weight": (c,),
            p + "mlp.gate_proj.weight": (config.intermediate_size, c),
            p + "mlp.up_proj.weight": (config.intermediate_size, c),
            p + "mlp.down_proj.weight": (c, config.intermediate_size),
        }
        if config.attention_bias:
            shapes |= {p + "self_attn.q_proj.bias": (q_out,),
                       p + "self_attn.k_proj.bias": (kv_out,),
                       p + "self_attn.v_proj.bias": (kv_out,)}
    return shapes


def check_weights(config: ModelConfig, weights: dict[str, torch.Tensor]) -> None:
    """Check that ``weights`` holds exactly what ``config`` implies.

    ``lm_head.weight`` may be absent when tied (the embedding is reused); a present one wins.

    Raises:
        KeyError: a missing weight, or an unexpected one (both listed, up to 5 each).
        ValueError: a weight of the wrong shape.
    """
    expected = expected_weight_shapes(config)
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected) - set(OPTIONAL_NAMES))
    if missing or unexpected:
        raise KeyError(f"weights do not match the config: missing {missing[:5]} "
                       f"({len(missing)} in all), unexpected {unexpected[:5]} "
                       f"({len(unexpected)} in all)")
    for name, shape in expected.items():
        if tuple(weights[name].shape) != shape:
            raise ValueError(f"weight {name} has shape {tuple(weights[name].shape)}, the config "
                             f"implies {shape}")
    if "lm_head.weight" in weights and tuple(weights["lm_head.weight"].shape) != \
            (config.vocab_size, config.hidden_size):
        raise ValueError(f"lm_head.weight has shape {tuple(weights['lm_head.weight'].shape)}, "
                         f"expected {(config.vocab_size, config.hidden_size)}")


@dataclass(frozen=True)
class LayerWeights:
    """One decoder layer's weights as the forward multiplies them: q/k/v and gate/up fused.

    Mirrors: vllm/model_executor/models/llama.py (``qkv_proj`` a QKVParallelLinear, ``gate_up_proj``
    a MergedColumnParallelLinear): one matmul instead of three, one instead of two.

    Attributes:
        input_layernorm: [hidden_size].
        qkv_proj: [(num_q_heads + 2 * num_kv_heads) * head_dim, hidden_size], rows q | k | v.
        qkv_bias: [(num_q_heads + 2 * num_kv_heads) * head_dim] or None.
        o_proj: [hidden_size, num_q_heads * head_dim].
        post_attention_layernorm: [hidden_size].
        gate_up_proj: [2 * intermediate_size, hidden_size], rows gate | up.
        down_proj: [hidden_size, intermediate_size].
    """

    input_layernorm: torch.Tensor
    qkv_proj: torch.Tensor
    qkv_bias: torch.Tensor | None
    o_proj: torch.Tensor
    post_attention_layernorm: torch.Tensor
    gate_up_proj: torch.Tensor
    down_proj: torch.Tensor


def _fuse_rows(weights: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    """Stack ``names`` along dim 0 and rebind each name to its slice (a view) of the result.

    Already-fused slices (a Model built from another Model's ``weights``) are reused, not copied.
    """
    parts = [weights[n] for n in names]
    base = parts[0]._base
    if base is not None and base.shape[0] == sum(p.shape[0] for p in parts) and \
            base.shape[1:] == parts[0].shape[1:] and base.is_contiguous():
        offsets = [0]
        for p in parts:
            offsets.append(offsets[-1] + p.shape[0])
        if all(p._base is base and p.data_ptr() == base[o].data_ptr()
               for p, o in zip(parts, offsets)):
            return base
    fused = torch.cat(parts)
    for name, view in zip(names, fused.split([p.shape[0] for p in parts])):
        weights[name] = view
    return fused


def fuse_layer_weights(config: ModelConfig,
                       weights: dict[str, torch.Tensor]) -> tuple[dict, list[LayerWeights]]:
    """Per layer, fused q/k/v and gate/up weights; and a copy of ``weights`` whose q/k/v/gate/up
    entries are views of the fused tensors (so the memory is not doubled).

    Args:
        config: the model's config.
        weights: checked by ``check_weights`` (not modified).

    Returns:
        ``(weights copy, [LayerWeights] * num_layers)``.
    """
    weights = dict(weights)
    layers = []
    for i in range(config.num_layers):
        p = f"model.layers.{i}."
        qkv = [p + f"self_attn.{x}_proj.weight" for x in "qkv"]
        bias = [p + f"self_attn.{x}_proj.bias" for x in "qkv"]
        layers.append(LayerWeights(
            input_layernorm=weights[p + "input_layernorm.weight"],
            qkv_proj=_fuse_rows(weights, qkv),
            qkv_bias=_fuse_rows(weights, bias) if config.attention_bias else None,
            o_proj=weights[p + "self_attn.o_proj.weight"],
            post_attention_layernorm=weights[p + "post_attention_layernorm.weight"],
            gate_up_proj=_fuse_rows(weights, [p + "mlp.gate_proj.weight",
                                              p + "mlp.up_proj.weight"]),
            down_proj=weights[p + "mlp.down_proj.weight"]))
    return weights, layers
