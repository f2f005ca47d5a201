"""The weight names and shapes a Llama-family ModelConfig implies, and a check of a loaded dict.

Names are Hugging Face's (``model.layers.{i}.self_attn.q_proj.weight``); both loaders produce them.
"""

from __future__ import annotations

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
