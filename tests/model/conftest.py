"""Fixtures for kvlab.model tests: the real SmolLM2 model and transformers' reference outputs.

transformers takes ~17-30 s to load the GGUF, so its outputs are computed ONCE per pytest run: under
pytest-xdist the first worker that needs them computes and saves them into the run's shared temp dir
(guarded by a file lock); the other workers load the file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# NOTE: without CUDA, kvlab.kernels switches on TRITON_INTERPRET; that only works if it is imported
# before anything else (transformers does) imports triton, whose own @jit helpers read it once.
import kvlab.kernels  # noqa: F401

STRINGS = [
    "The capital of France is",
    "Hello, world!  Two spaces, a tab\tand a newline\n.",
    "héllo wörld — naïve café, 你好, こんにちは, 🤗🚀",
    "12345 + 678 = 9,999.5 and 3.14159",
    "<|im_start|>user\nhi<|im_end|>",
    "don't you'll WE'RE   x\n\n\ny",
    "",
]
CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."},
     {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another, ünïcode?"}],
]
GREEDY_PROMPTS = ["The capital of France is", "def fibonacci(n):",
                  "Water boils at a temperature of"]
NUM_GREEDY_TOKENS = 8
LONG_PROMPT = ("Paged attention stores the keys and values of every token in fixed-size blocks, "
               "so a sequence can grow without copying and two requests can share the blocks of a "
               "common prefix.")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # NOTE: 2 OpenMP threads per xdist worker on a 2-core box oversubscribe and stall for seconds.
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def smollm_gguf() -> Path:
    from kvlab.model import default_gguf_path

    try:
        return default_gguf_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def smollm(smollm_gguf):
    """kvlab's SmolLM2-135M-Instruct, float32, torch attention backend (CPU)."""
    from kvlab.model import Model

    torch.set_num_threads(1)
    return Model.from_pretrained(smollm_gguf, progress=False, attention_backend="torch")


def _compute_reference(gguf: Path) -> dict:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                 dtype=torch.float32).eval()
    ref: dict = {"strings": STRINGS, "chats": CHATS, "long_prompt": LONG_PROMPT}
    ref["string_ids"] = [tok(s, add_special_tokens=True)["input_ids"] for s in STRINGS]
    ref["chat_text"] = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False)
                        for c in CHATS]
    ref["chat_ids"] = [tok(t, add_special_tokens=False)["input_ids"] for t in ref["chat_text"]]
    ref["decoded"] = [tok.decode(ids) for ids in ref["string_ids"]]
    with torch.inference_mode():
        long_ids = tok(LONG_PROMPT)["input_ids"]
        ref["long_ids"] = long_ids
        ref["long_logits"] = model(torch.tensor([long_ids])).logits[0].float()  # (T, V)
        ref["greedy"] = []
        for prompt in GREEDY_PROMPTS:
            ids = tok(prompt)["input_ids"]
            out = model.generate(torch.tensor([ids]), max_new_tokens=NUM_GREEDY_TOKENS,
                                 do_sample=False, attention_mask=torch.ones(1, len(ids)))
            ref["greedy"].append((ids, out[0, len(ids):].tolist()))
    return ref


@pytest.fixture(scope="session")
def hf_reference(smollm_gguf, tmp_path_factory) -> dict:
    """transformers' tokenizer ids, chat renderings, logits and greedy tokens for SmolLM2."""
    pytest.importorskip("transformers")
    torch.set_num_threads(1)
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return _compute_reference(smollm_gguf)
    from filelock import FileLock

    path = tmp_path_factory.getbasetemp().parent / "kvlab_model_hf_reference.pt"
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            return torch.load(path)
        ref = _compute_reference(smollm_gguf)
        torch.save(ref, path)
    return ref


TINY_CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "paged attention keeps keys and values in blocks of tokens",
    "héllo wörld, naïve café 12345",
] * 20
TINY_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@pytest.fixture(scope="session")
def tiny_bpe():
    """A byte-level BPE (about 300 ids, specials 0-2) trained on a few sentences: no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=TINY_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TINY_CORPUS, trainer)
    return tok
