"""Hugging Face folders (config.json + model.safetensors + tokenizer.json) of tiny random Llama and
Qwen2 models, written by transformers itself, load and run to transformers' own logits."""

from __future__ import annotations

import json

import pytest
import torch

from kvlab.model import Model, Tokenizer, build_attention_metadata, load_model
from kvlab.model.hf_loader import config_from_hf

transformers = pytest.importorskip("transformers")

TINY_CHAT_TEMPLATE = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] "
                      "+ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
                      "{{ '<|im_start|>assistant\\n' }}{% endif %}")
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2,
            "max_position_embeddings": 256, "bos_token_id": 1, "eos_token_id": 2}


QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen2_style(tiny_bpe):
    """The tiny BPE with Qwen2's own normalizer and pre-tokenizer (as in Qwen2's tokenizer.json,
    and as transformers' Qwen2Tokenizer imposes)."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers

    tok = Tokenizer.from_str(tiny_bpe.to_str())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return tok


def save_folder(path, model, tokenizer):
    model.save_pretrained(path)
    tokenizer.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<|im_start|>",
        "eos_token": "<|im_end|>", "chat_template": TINY_CHAT_TEMPLATE}))
    return path


@pytest.fixture(scope="module")
def qwen2_hybrid_folder(tmp_path_factory, tiny_bpe):
    """Qwen2, tied embeddings, q/k/v biases, layers 1-2 with a 5-token sliding window."""
    config = transformers.Qwen2Config(vocab_size=300, num_hidden_layers=3, use_sliding_window=True,
                                      sliding_window=5, max_window_layers=1,
                                      tie_word_embeddings=True, **TINY)
    torch.manual_seed(0)
    model = transformers.Qwen2ForCausalLM(config).eval()
    for name, p in model.named_parameters():  # make biases and attention patterns non-trivial
        if "bias" in name or "proj" in name:
            torch.nn.init.normal_(p, std=0.1)
    return save_folder(tmp_path_factory.mktemp("qwen2"), model, qwen2_style(tiny_bpe)), model


@pytest.fixture(scope="module")
def llama3_folder(tmp_path_factory, tiny_bpe):
    """Llama, untied lm_head, llama3 RoPE scaling that bends the low frequencies."""
    config = transformers.LlamaConfig(
        vocab_size=300, num_hidden_layers=2, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32}, **TINY)
    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(config).eval()
    for name, p in model.named_parameters():
        if "proj" in name:
            torch.nn.init.normal_(p, std=0.1)
    return save_folder(tmp_path_factory.mktemp("llama3"), model, tiny_bpe), model


def paged_hybrid_logits(model, ids, chunks, block_size=4):
    """Run ``ids`` chunk by chunk with one block table per KV-cache group; sliding-window groups get
    the null block (0) for blocks wholly outside the window, as vLLM's manager leaves them."""
    groups = model.kv_cache_groups()
    blocks = [[1 + g + len(groups) * j for j in range(-(-len(ids) // block_size))]
              for g in range(len(groups))]
    kv_caches = model.allocate_kv_caches(num_blocks=64, block_size=block_size)
    logits, done = [], 0
    for n in chunks:
        tables = []
        for (window, _), ids_g in zip(groups, blocks, strict=False):
            first = 0 if window is None else max(done - window + 1, 0)
            tables.append([[0 if (j + 1) * block_size <= first else b
                            for j, b in enumerate(ids_g)]])
        positions, md = build_attention_metadata(tables[0], [done], [n], block_size,
                                                 group_block_ids=tables)
        logits.append(model.forward(torch.tensor(ids[done:done + n]), positions, md, kv_caches,
                                    return_all_logits=True))
        done += n
    return torch.cat(logits)  # (T, V)


def test_qwen2_hybrid_folder_matches_transformers(qwen2_hybrid_folder):
    folder, hf_model = qwen2_hybrid_folder
    model = Model.from_pretrained(folder, progress=False)
    c = model.config
    assert (c.architecture, c.attention_bias, c.tie_word_embeddings) == ("qwen2", True, True)
    assert c.sliding_window == (None, 5, 5)
    assert model.kv_cache_groups() == [(None, [0]), (5, [1, 2])]
    ids = torch.randint(3, 300, (17,), generator=torch.Generator().manual_seed(2)).tolist()
    paged = paged_hybrid_logits(model, ids, [6, 5, 1, 1, 4])
    with torch.inference_mode():
        expected = hf_model(torch.tensor([ids])).logits[0]
    assert (paged - expected).abs().max() <= 1e-4


def test_llama3_rope_untied_folder_matches_transformers(llama3_folder):
    folder, hf_model = llama3_folder
    config, weights = load_model(folder, progress=False)
    assert config.rope_scaling is not None and config.rope_scaling.rope_type == "llama3"
    assert not config.tie_word_embeddings and "lm_head.weight" in weights
    model = Model.from_pretrained(folder, progress=False)
    ids = torch.randint(3, 300, (40,), generator=torch.Generator().manual_seed(3)).tolist()
    paged = paged_hybrid_logits(model, ids, [30, 9, 1])
    with torch.inference_mode():
        expected = hf_model(torch.tensor([ids])).logits[0]
    assert (paged - expected).abs().max() <= 1e-4


def test_folder_tokenizer_matches_transformers(qwen2_hybrid_folder):
    folder, _ = qwen2_hybrid_folder
    ours = Tokenizer.from_hf_folder(folder)
    theirs = transformers.AutoTokenizer.from_pretrained(str(folder))
    for text in ("the quick brown fox", "héllo wörld 12345!", "<|im_start|>x<|im_end|>",
                 "cafe\u0301 (NFC-normalized), don't\n\n  x"):
        assert ours.encode(text) == theirs(text)["input_ids"]
    chat = [{"role": "user", "content": "paged attention?"}]
    assert ours.apply_chat_template(chat, tokenize=False) == theirs.apply_chat_template(
        chat, add_generation_prompt=True, tokenize=False)
    assert (ours.bos_token_id, ours.eos_token_id) == (1, 2)


def test_config_from_hf_refuses_what_it_cannot_run():
    base = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
            "num_attention_heads": 4,
                "intermediate_size": 128, "vocab_size": 300}
    assert config_from_hf(base).head_dim == 16
    with pytest.raises(ValueError, match="model_type 'gemma3'"):
        config_from_hf(dict(base, model_type="gemma3"))
    with pytest.raises(ValueError, match="mlp_bias"):
        config_from_hf(dict(base, mlp_bias=True))
    with pytest.raises(ValueError, match="'yarn' not supported"):
        config_from_hf(dict(base, rope_scaling={"rope_type": "yarn", "factor": 4.0}))
    with pytest.raises(ValueError, match="layer_types"):
        config_from_hf(dict(base, layer_types=["full_attention"], sliding_window=4))
    mistral = config_from_hf(dict(base, model_type="mistral", sliding_window=4096))
    assert (mistral.architecture, mistral.sliding_window) == ("llama", (4096, 4096))


def test_incomplete_folders_are_reported(tmp_path, tiny_bpe):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 128, "vocab_size": 300}))
    with pytest.raises(FileNotFoundError, match="safetensors"):
        load_model(tmp_path, progress=False)
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json"):
        Tokenizer.from_hf_folder(tmp_path)
