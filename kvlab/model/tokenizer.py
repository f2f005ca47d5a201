"""Tokenizer + chat template, built from a GGUF's metadata or an HF folder's tokenizer.json.

The GGUF path rebuilds the byte-level BPE (vocab + merges + pre-tokenizer) with the ``tokenizers``
package, giving the same ids as transformers; the chat template from the metadata renders with
jinja2 the way transformers renders it (sandboxed, ``trim_blocks``/``lstrip_blocks``).

Examples:
    >>> tok = load_tokenizer()
    >>> tok.encode("The capital of France is")
    [504, 3575, 282, 4649, 314]
    >>> tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False)[:26]
    '<|im_start|>system\\nYou are'

Left out: SentencePiece vocabularies (``tokenizer.ggml.model == "llama"``, Llama 2 / TinyLlama
GGUFs) raise a ValueError; use the model's Hugging Face folder (its tokenizer.json) for those.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from kvlab.model.gguf_loader import MAX_VOCAB, gguf_field, gguf_value, open_gguf

# NOTE: the split regexes llama.cpp names by ``tokenizer.ggml.pre`` (llama-vocab.cpp); "default",
# "gpt2" and "smollm" use GPT-2's own regex (ByteLevel with use_regex=True).
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = ("default", "gpt2", "smollm", "llama-bpe", "llama3", "qwen2")
_TOKEN_TYPE_CONTROL, _TOKEN_TYPE_USER_DEFINED = 3, 4


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _pre_tokenizer(pre: str) -> Any:
    from tokenizers import Regex, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in ("default", "gpt2"):
        return byte_level
    if pre == "smollm":  # GPT-2 regex after splitting every digit on its own
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    regex = _LLAMA3_SPLIT if pre in ("llama-bpe", "llama3") else _QWEN2_SPLIT
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def backend_from_gguf(reader: Any) -> Any:
    """Build a ``tokenizers.Tokenizer`` from a GGUF's ``tokenizer.ggml.*`` metadata.

    Raises:
        ValueError: not a byte-level BPE vocabulary, an unknown ``tokenizer.ggml.pre``, or
            metadata of the wrong type or out of range (tokens: at most MAX_VOCAB distinct
            strings; merges: "a b" with a, b and ab tokens; token types one int per token;
            special ids inside the vocabulary), naming the key.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, processors

    kind = gguf_field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(f"tokenizer.ggml.model {_shown(kind)} not supported (only byte-level "
                         "BPE, 'gpt2'); load the model's Hugging Face folder with its "
                         "tokenizer.json")  # fmt: skip
    pre = gguf_value(reader, "tokenizer.ggml.pre", "str", "default")
    if pre not in PRE_TOKENIZERS:
        raise ValueError(f"tokenizer.ggml.pre {_shown(pre)} not supported; allowed: "
                         f"{', '.join(PRE_TOKENIZERS)}")
    tokens, merges, types = _vocabulary(reader)
    try:
        backend = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges,
                                       ignore_merges=pre in ("llama-bpe", "llama3")))
    except Exception as exc:  # NOTE: the tokenizers library raises bare Exception
        raise ValueError(f"tokenizer.ggml.tokens / merges refused by the tokenizers library: "
                         f"{_shown(str(exc))}") from None  # fmt: skip
    backend.pre_tokenizer = _pre_tokenizer(pre)
    backend.decoder = decoders.ByteLevel()
    if pre == "qwen2":
        backend.normalizer = normalizers.NFC()
    backend.add_special_tokens([
        AddedToken(tokens[i], special=True, normalized=False)
        for i, t in enumerate(types) if t == _TOKEN_TYPE_CONTROL])
    backend.add_tokens([
        AddedToken(tokens[i], special=False, normalized=False)
        for i, t in enumerate(types) if t == _TOKEN_TYPE_USER_DEFINED])
    bos_id = gguf_value(reader, "tokenizer.ggml.bos_token_id", "int", None, 0, len(tokens) - 1)
    if gguf_value(reader, "tokenizer.ggml.add_bos_token", "bool", False) and bos_id is not None:
        bos = tokens[bos_id]
        backend.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
    return backend


def _vocabulary(reader: Any) -> tuple[list[str], list[tuple[str, str]], list[int]]:
    """(tokens, merges as pairs, token types), checked (see ``backend_from_gguf``)."""
    tokens = gguf_value(reader, "tokenizer.ggml.tokens", "str_list")
    if not tokens or len(tokens) > MAX_VOCAB:
        raise ValueError(f"GGUF metadata tokenizer.ggml.tokens must hold 1 to {MAX_VOCAB} "
                         f"tokens, got {len(tokens)}")  # fmt: skip
    vocab = set(tokens)
    merges = []
    for m in gguf_value(reader, "tokenizer.ggml.merges", "str_list", []):
        pair = tuple(m.split(" ", 1))
        if len(pair) != 2 or not {pair[0], pair[1], pair[0] + pair[1]} <= vocab:
            raise ValueError(f"GGUF metadata tokenizer.ggml.merges: {_shown(m)} is not two "
                             "tokens of the vocabulary joined by one space whose "
                             "concatenation is a token too")  # fmt: skip
        merges.append(pair)
    types = gguf_value(reader, "tokenizer.ggml.token_type", "int_list", [1] * len(tokens),
                       -(1 << 31), (1 << 31) - 1)  # fmt: skip
    if len(types) != len(tokens):
        raise ValueError(f"GGUF metadata tokenizer.ggml.token_type has {len(types)} entries for "
                         f"{len(tokens)} tokens; allowed: one per token")  # fmt: skip
    return tokens, merges, types


def _render_chat(template: str, messages: list[dict[str, Any]], **context: Any) -> str:
    from jinja2 import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False,
                                                                    indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template).render(messages=messages, **context)


class Tokenizer:
    """Text <-> token ids, special ids and the chat template of one model.

    Attributes:
        backend: the underlying ``tokenizers.Tokenizer``.
        bos_token_id: begin-of-sequence id, or None.
        eos_token_ids: ids that end generation, first one = the tokenizer's eos token.
        chat_template: jinja2 source, or None.
    """

    def __init__(self, backend: Any, *, bos_token_id: int | None,
                 eos_token_ids: tuple[int, ...] | list[int], chat_template: str | None = None):
        self.backend = backend
        self.bos_token_id = bos_token_id
        self.eos_token_ids = tuple(eos_token_ids)
        self.chat_template = chat_template

    @classmethod
    def from_gguf(cls, reader_or_path: Any) -> Tokenizer:
        """Build from a GGUF file path or an open ``GGUFReader`` (see ``backend_from_gguf``)."""
        reader = open_gguf(reader_or_path) if isinstance(reader_or_path, (str, Path)) \
            else reader_or_path
        backend = backend_from_gguf(reader)
        last = backend.get_vocab_size() - 1
        eos = [gguf_value(reader, f"tokenizer.ggml.{k}_token_id", "int", None, 0, last)
               for k in ("eos", "eot", "eom")]  # fmt: skip
        return cls(backend,
                   bos_token_id=gguf_value(reader, "tokenizer.ggml.bos_token_id", "int", None, 0,
                                           last),
                   eos_token_ids=tuple(dict.fromkeys(i for i in eos if i is not None)),
                   chat_template=gguf_value(reader, "tokenizer.chat_template", "str", None))

    @classmethod
    def from_hf_folder(cls, folder: str | Path) -> Tokenizer:
        """Build from ``tokenizer.json`` (+ ``tokenizer_config.json`` / ``chat_template.jinja``).

        Raises:
            FileNotFoundError: the folder has no tokenizer.json.
        """
        from kvlab.model.hf_tokenizer import read_hf_tokenizer

        backend, bos_id, eos_ids, template = read_hf_tokenizer(Path(folder))
        return cls(backend, bos_token_id=bos_id, eos_token_ids=eos_ids, chat_template=template)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (tokens)."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    @property
    def eos_token_id(self) -> int | None:
        """The primary end-of-sequence id (``eos_token_ids[0]``), or None."""
        return self.eos_token_ids[0] if self.eos_token_ids else None

    def token_to_id(self, token: str) -> int | None:
        """Id of a vocabulary entry (``"<|im_end|>"``), or None if absent."""
        return self.backend.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        """Vocabulary entry of an id (byte-level form, e.g. ``"ĠParis"``), or None."""
        return self.backend.id_to_token(token_id)

    def _token_text(self, token_id: int | None) -> str:
        return "" if token_id is None else (self.backend.id_to_token(token_id) or "")

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text`` (a BOS is added only where the model's tokenizer adds one).

        Raises:
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, token_ids: list[int], *, skip_special_tokens: bool = False) -> str:
        """Text of ``token_ids``.

        Raises:
            ValueError: an id outside ``[0, vocab_size)``.
        """
        ids = [int(i) for i in token_ids]
        vocab_size = self.vocab_size  # NOTE: ~10 ms per call on a 49k vocabulary: read it once
        bad = [i for i in ids if not 0 <= i < vocab_size]
        if bad:
            raise ValueError(f"token ids must lie in [0, {vocab_size}), got {bad[:5]}")
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def apply_chat_template(self, messages: list[dict[str, Any]], *,
                            add_generation_prompt: bool = True, tokenize: bool = True,
                            **kwargs: Any) -> list[int] | str:
        """Render a conversation with the model's chat template, as transformers does.

        Args:
            messages: ``[{"role": "user", "content": "..."}, ...]``.
            add_generation_prompt: end with the assistant header so the model answers.
            tokenize: True = return ids (encoded without adding special tokens, like transformers);
                False = return the rendered text.
            **kwargs: extra template variables.

        Raises:
            ValueError: the model has no chat template, or ``messages`` is not a list of dicts with
                "role" and "content".
        """
        if self.chat_template is None:
            raise ValueError("this tokenizer has no chat template")
        if not isinstance(messages, list) or not all(
                isinstance(m, dict) and "role" in m and "content" in m for m in messages):
            raise ValueError("messages must be a list of dicts with 'role' and 'content' keys")
        text = _render_chat(self.chat_template, messages,
                            add_generation_prompt=add_generation_prompt,
                            bos_token=self._token_text(self.bos_token_id),
                            eos_token=self._token_text(self.eos_token_id), **kwargs)
        return self.encode(text, add_special_tokens=False) if tokenize else text


def load_tokenizer(source: str | Path | None = None) -> Tokenizer:
    """The tokenizer of a weight source: None (shipped SmolLM2), a .gguf file, or an HF folder."""
    from kvlab.model.loader import resolve_source

    kind, path = resolve_source(source)
    return Tokenizer.from_gguf(path) if kind == "gguf" else Tokenizer.from_hf_folder(path)


__all__ = ["Tokenizer", "backend_from_gguf", "load_tokenizer"]
