"""kvlab.model: a real small model (SmolLM2-135M-Instruct) running on kvlab's paged KV cache.

* ``load_model(source=None)`` -> ``(ModelConfig, weights)``: the shipped SmolLM2 GGUF, any local
  Llama / Qwen2 GGUF, or a local Hugging Face folder (config.json + *.safetensors + tokenizer.json).
* ``Tokenizer`` / ``load_tokenizer``: byte-level BPE ids identical to transformers', chat template.
* ``Model``: the forward over
  ``kv_caches[layer]: [2, num_blocks, block_size, num_kv_heads, head_dim]``, driven by
  ``AttentionMetadata`` (slot_mapping, block_table, seq_lens, query_start_loc).

Examples:
    >>> from kvlab.model import Model, build_attention_metadata
    >>> model = Model.from_pretrained(progress=False)
    >>> kv_caches = model.allocate_kv_caches(num_blocks=16, block_size=16)
    >>> ids = model.tokenizer.encode("The capital of France is")
    >>> positions, md = build_attention_metadata([[5]], [0], [len(ids)], block_size=16)
    >>> logits = model.forward(torch.tensor(ids), positions, md, kv_caches)   # (1, vocab_size)
    >>> model.tokenizer.decode([int(logits.argmax())])
    ' Paris'
"""

from kvlab.model.attention_metadata import AttentionMetadata, build_attention_metadata
from kvlab.model.config import ModelConfig, RopeScaling
from kvlab.model.gguf_loader import default_gguf_path
from kvlab.model.llama import Model, default_kv_cache_group_ids
from kvlab.model.loader import load_model, read_gguf_header, resolve_source
from kvlab.model.tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "AttentionMetadata",
    "Model",
    "ModelConfig",
    "RopeScaling",
    "Tokenizer",
    "build_attention_metadata",
    "default_gguf_path",
    "default_kv_cache_group_ids",
    "load_model",
    "load_tokenizer",
    "read_gguf_header",
    "resolve_source",
]
