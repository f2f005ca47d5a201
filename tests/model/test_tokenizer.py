"""SmolLM2's tokenizer rebuilt from the GGUF metadata vs transformers' (ids, decoding, chat)."""

from __future__ import annotations

import pytest

from kvlab.model import Tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.model]


def test_ids_match_transformers(smollm, hf_reference):
    tok = smollm.tokenizer
    for text, expected in zip(hf_reference["strings"], hf_reference["string_ids"], strict=False):
        assert tok.encode(text) == expected, text
    assert tok.encode(hf_reference["long_prompt"]) == hf_reference["long_ids"]


def test_decode_matches_transformers_and_round_trips(smollm, hf_reference):
    tok = smollm.tokenizer
    for text, ids, decoded in zip(hf_reference["strings"], hf_reference["string_ids"],
                                  hf_reference["decoded"], strict=False):
        assert tok.decode(ids) == decoded
        assert tok.decode(ids) == text  # byte-level BPE is lossless


def test_chat_template_matches_transformers(smollm, hf_reference):
    tok = smollm.tokenizer
    for chat, text, ids in zip(hf_reference["chats"], hf_reference["chat_text"],
                               hf_reference["chat_ids"], strict=False):
        assert tok.apply_chat_template(chat, tokenize=False) == text
        assert tok.apply_chat_template(chat) == ids
    no_prompt = tok.apply_chat_template(hf_reference["chats"][0], add_generation_prompt=False,
                                        tokenize=False)
    assert hf_reference["chat_text"][0] == no_prompt + "<|im_start|>assistant\n"


def test_special_ids(smollm):
    tok = smollm.tokenizer
    assert (tok.bos_token_id, tok.eos_token_ids, tok.eos_token_id) == (1, (2,), 2)
    assert tok.token_to_id("<|im_end|>") == 2 and tok.id_to_token(1) == "<|im_start|>"
    assert tok.vocab_size == smollm.config.vocab_size
    ids = tok.encode("<|im_start|>user\nhi<|im_end|>")
    assert tok.decode(ids, skip_special_tokens=True) == "user\nhi"


def test_bad_input_is_rejected(smollm):
    tok = smollm.tokenizer
    with pytest.raises(TypeError, match="str"):
        tok.encode(123)
    with pytest.raises(ValueError, match=r"\[0, 49152\)"):
        tok.decode([5, 49152])
    with pytest.raises(ValueError, match="role"):
        tok.apply_chat_template([{"content": "no role"}])
    bare = Tokenizer(tok.backend, bos_token_id=None, eos_token_ids=())
    with pytest.raises(ValueError, match="no chat template"):
        bare.apply_chat_template([{"role": "user", "content": "x"}])
