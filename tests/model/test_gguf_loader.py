"""GGUF loading: tiny GGUF files written with gguf.GGUFWriter (llama.cpp's conventions) load back
to the original Hugging Face-layout weights, and run to the dense reference's logits."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kvlab.model import Model, load_model, resolve_source
from kvlab.model.gguf_loader import config_from_gguf, hf_name, open_gguf, unpermute_rotary_rows
from kvlab.model.reference import dense_forward, random_weights, tiny_config

gguf = pytest.importorskip("gguf")

_HF_TO_GGUF = {
    "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias", "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
}


def llama_cpp_permute(w: np.ndarray, num_heads: int) -> np.ndarray:
    """What llama.cpp's converter does to Q/K rows for its interleaved RoPE."""
    return (w.reshape(num_heads, 2, w.shape[0] // num_heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def gguf_name(name: str) -> str:
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight":
             "output_norm.weight", "lm_head.weight": "output.weight"}
    if name in fixed:
        return fixed[name]
    _, _, layer, rest = name.split(".", 3)
    return f"blk.{layer}.{_HF_TO_GGUF[rest]}"


def write_tiny_gguf(path, config, weights, tiny_bpe, *, quantize=(), tokenizer_model="gpt2"):
    arch = config.architecture
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_block_count(config.num_layers)
    w.add_context_length(config.max_position_embeddings)
    w.add_embedding_length(config.hidden_size)
    w.add_feed_forward_length(config.intermediate_size)
    w.add_head_count(config.num_q_heads)
    w.add_head_count_kv(config.num_kv_heads)
    w.add_rope_freq_base(config.rope_theta)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    if config.sliding_window is not None:
        w.add_sliding_window(next(x for x in config.sliding_window if x is not None))
        w.add_sliding_window_pattern([x is not None for x in config.sliding_window])
    model = json.loads(tiny_bpe.to_str())["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    w.add_tokenizer_model(tokenizer_model)
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    for name, tensor in weights.items():
        array = tensor.float().numpy()
        if arch == "llama" and ".q_proj." in name:
            array = llama_cpp_permute(array, config.num_q_heads)
        elif arch == "llama" and ".k_proj." in name:
            array = llama_cpp_permute(array, config.num_kv_heads)
        if name in quantize:
            qtype = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(gguf_name(name), gguf.quants.quantize(array, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(gguf_name(name), array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_unpermute_inverts_llama_cpp_permutation():
    w = torch.randn(3 * 8, 5)
    b = torch.randn(3 * 8)
    for t in (w, b):
        permuted = torch.from_numpy(llama_cpp_permute(t.numpy(), 3))
        assert not torch.equal(permuted, t)
        assert torch.equal(unpermute_rotary_rows(permuted, 3), t)


def test_hf_names():
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_name("blk.12.ffn_down.weight") == "model.layers.12.mlp.down_proj.weight"
    assert hf_name("blk.0.attn_k.bias") == "model.layers.0.self_attn.k_proj.bias"
    with pytest.raises(KeyError, match=r"blk\.0\.ffn_gate_exps\.weight"):
        hf_name("blk.0.ffn_gate_exps.weight")


@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_tiny_gguf_round_trip_and_forward(tmp_path, tiny_bpe, architecture):
    config = tiny_config(architecture=architecture, attention_bias=architecture == "qwen2",
                         vocab_size=tiny_bpe.get_vocab_size(), num_kv_heads=1,
                         tie_word_embeddings=architecture == "qwen2")
    weights = random_weights(config, seed=5)
    path = tmp_path / "tiny.gguf"
    q8 = "model.layers.1.mlp.up_proj.weight"
    write_tiny_gguf(path, config, weights, tiny_bpe, quantize=(q8,))
    loaded_config, loaded = load_model(path, progress=False)
    assert loaded_config == config
    assert set(loaded) == set(weights)
    for name, tensor in weights.items():
        if name != q8:
            assert torch.equal(loaded[name], tensor), name
    q8_ref = gguf.quants.dequantize(gguf.quants.quantize(weights[q8].numpy(),
                                                         gguf.GGMLQuantizationType.Q8_0),
                                    gguf.GGMLQuantizationType.Q8_0)
    assert torch.equal(loaded[q8], torch.from_numpy(q8_ref))
    assert (loaded[q8] - weights[q8]).abs().max() < 0.01  # Q8_0 error, weights ~N(0, 0.1)

    model = Model.from_pretrained(path, progress=False)
    text = "the lazy fox"
    assert model.tokenizer.encode(text) == tiny_bpe.encode(text).ids
    ids = torch.tensor(model.tokenizer.encode(text))
    from kvlab.model import build_attention_metadata
    positions, md = build_attention_metadata([[3, 1]], [0], [len(ids)], block_size=8)
    kv_caches = model.allocate_kv_caches(num_blocks=4, block_size=8)
    logits = model.forward(ids, positions, md, kv_caches, return_all_logits=True)
    assert (logits - dense_forward(config, loaded, ids)).abs().max() <= 1e-4


def test_gguf_sliding_window_pattern(tmp_path, tiny_bpe):
    config = tiny_config(num_layers=3, sliding_window=(8, 8, None),
                         vocab_size=tiny_bpe.get_vocab_size())
    path = tmp_path / "swa.gguf"
    write_tiny_gguf(path, config, random_weights(config), tiny_bpe)
    assert config_from_gguf(open_gguf(path)).sliding_window == (8, 8, None)


def test_gguf_progress_bar_and_dtype(tmp_path, tiny_bpe, capsys):
    config = tiny_config(vocab_size=tiny_bpe.get_vocab_size())
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, config, random_weights(config), tiny_bpe)
    load_model(path, progress=False)
    assert capsys.readouterr().err == ""
    _, weights = load_model(path, progress=True, dtype=torch.bfloat16)
    assert "dequantize GGUF" in capsys.readouterr().err
    assert all(t.dtype == torch.bfloat16 for t in weights.values())
    with pytest.raises(TypeError, match="dtype"):
        load_model(path, dtype=torch.int8)


def test_sentencepiece_gguf_tokenizer_is_refused(tmp_path, tiny_bpe):
    from kvlab.model import Tokenizer

    config = tiny_config(vocab_size=tiny_bpe.get_vocab_size())
    path = tmp_path / "spm.gguf"
    write_tiny_gguf(path, config, random_weights(config), tiny_bpe, tokenizer_model="llama")
    with pytest.raises(ValueError, match="only byte-level BPE"):
        Tokenizer.from_gguf(path)


def test_resolve_source(tmp_path, tiny_bpe):
    with pytest.raises(FileNotFoundError, match="not found"):
        resolve_source(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"neither config\.json nor"):
        resolve_source(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"not a \.gguf"):
        resolve_source(tmp_path / "notes.txt")
    config = tiny_config(vocab_size=tiny_bpe.get_vocab_size())
    write_tiny_gguf(tmp_path / "a.gguf", config, random_weights(config), tiny_bpe)
    assert resolve_source(tmp_path) == ("gguf", tmp_path / "a.gguf")
    (tmp_path / "b.gguf").write_bytes((tmp_path / "a.gguf").read_bytes())
    with pytest.raises(ValueError, match="several GGUF"):
        resolve_source(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert resolve_source(tmp_path) == ("hf", tmp_path)
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf at all")
    with pytest.raises(ValueError, match="not a readable GGUF"):
        open_gguf(tmp_path / "bad.gguf")
