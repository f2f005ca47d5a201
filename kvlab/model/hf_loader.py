"""Load a local Hugging Face folder (config.json + *.safetensors + tokenizer.json), Llama family.

Accepted ``model_type``: "llama" (Llama 2/3, SmolLM), "mistral" (Llama + a sliding window on every
layer), "qwen2" (Llama + q/k/v biases). Nothing is ever downloaded: the folder must hold the files.

Left out: ``mlp_bias=True`` checkpoints and RoPE types other than default/linear/llama3 are refused
with a ValueError rather than run wrongly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from kvlab.model.config import ModelConfig, rope_scaling_from_dict
from kvlab.model.progress import progress_bar

SUPPORTED_MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2"}


def read_config_json(folder: str | Path) -> dict[str, Any]:
    """The parsed ``config.json`` of ``folder``.

    Raises:
        FileNotFoundError: no config.json in the folder.
    """
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json (a Hugging Face model folder needs "
                                "config.json, *.safetensors and tokenizer.json)")
    return json.loads(path.read_text(encoding="utf-8"))


def _as_id_tuple(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(int(v) for v in value) if isinstance(value, (list, tuple)) else (int(value),)


def _sliding_windows(raw: dict[str, Any], num_layers: int) -> tuple[int | None, ...] | None:
    """Per-layer windows from ``layer_types`` (Gemma-3 / transformers 5 style) or older flags."""
    window = raw.get("sliding_window")
    layer_types = raw.get("layer_types")
    if layer_types is not None:
        if len(layer_types) != num_layers:
            raise ValueError(f"config.json layer_types has {len(layer_types)} entries for "
                             f"{num_layers} layers")
        allowed = {"full_attention", "sliding_attention"}
        if not set(layer_types) <= allowed:
            raise ValueError(f"layer_types entries must be in {sorted(allowed)}, got "
                             f"{sorted(set(layer_types) - allowed)}")
        windows = tuple(int(window) if t == "sliding_attention" else None for t in layer_types)
    elif window is None:
        return None
    elif raw.get("model_type") == "qwen2":
        if not raw.get("use_sliding_window", False):
            return None
        first = int(raw.get("max_window_layers", num_layers))
        windows = tuple(int(window) if i >= first else None for i in range(num_layers))
    else:
        windows = (int(window),) * num_layers
    return None if all(w is None for w in windows) else windows


def config_from_hf(raw: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from a parsed config.json.

    Raises:
        ValueError: an unsupported model_type, ``mlp_bias=True`` or an unsupported RoPE type.
        KeyError: a required key is missing.
    """
    model_type = raw.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"model_type {model_type!r} not supported; allowed: "
                         f"{', '.join(SUPPORTED_MODEL_TYPES)}")
    if raw.get("mlp_bias"):
        raise ValueError("mlp_bias=True is not supported by kvlab's Llama forward")
    rope = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    theta = raw.get("rope_theta", rope.get("rope_theta", 10000.0))
    num_layers, num_q_heads = int(raw["num_hidden_layers"]), int(raw["num_attention_heads"])
    arch = SUPPORTED_MODEL_TYPES[model_type]
    return ModelConfig(
        architecture=arch,
        num_layers=num_layers,
        hidden_size=int(raw["hidden_size"]),
        num_q_heads=num_q_heads,
        num_kv_heads=int(raw.get("num_key_value_heads") or num_q_heads),
        head_dim=int(raw.get("head_dim") or raw["hidden_size"] // num_q_heads),
        intermediate_size=int(raw["intermediate_size"]),
        rope_theta=float(theta),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        vocab_size=int(raw["vocab_size"]),
        max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        bos_token_id=raw.get("bos_token_id"),
        eos_token_ids=_as_id_tuple(raw.get("eos_token_id")),
        sliding_window=_sliding_windows(raw, num_layers),
        attention_bias=arch == "qwen2" or bool(raw.get("attention_bias", False)),
        rope_scaling=rope_scaling_from_dict(rope),
    )


def weights_from_safetensors(folder: str | Path, *, dtype: torch.dtype = torch.float32,
                             device: str | torch.device = "cpu",
                             progress: bool = True) -> dict[str, torch.Tensor]:
    """Read every ``*.safetensors`` file of ``folder`` (shards included) into one name->tensor dict.

    Raises:
        FileNotFoundError: the folder holds no .safetensors file.
    """
    from safetensors.torch import load_file

    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} holds no *.safetensors file (only safetensors "
                                "checkpoints are read; convert .bin files first)")
    weights: dict[str, torch.Tensor] = {}
    for path in progress_bar(files, desc="read safetensors", unit="file", enable=progress):
        for name, tensor in load_file(str(path), device="cpu").items():
            weights[name] = tensor.to(device=device, dtype=dtype)
    return weights


def load_hf_folder(folder: str | Path, *, dtype: torch.dtype = torch.float32,
                   device: str | torch.device = "cpu",
                   progress: bool = True) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Read config.json and the safetensors weights of a local Hugging Face model folder."""
    config = config_from_hf(read_config_json(folder))
    return config, weights_from_safetensors(folder, dtype=dtype, device=device, progress=progress)
