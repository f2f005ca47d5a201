"""The small value types a Request carries: sampling/pooling params, LoRA, multimodal items.

Mirrors (only the fields the KV-cache manager and block hashing read):
vllm/sampling_params.py::SamplingParams, vllm/pooling_params.py::PoolingParams,
vllm/lora/request.py::LoRARequest, vllm/multimodal/inputs.py::{MultiModalFeatureSpec,
PlaceholderRange}, and vllm/v1/utils.py::ConstantList. Re-exported by ``kvlab.core.request``.

Examples:
    >>> SamplingParams(max_tokens=8).skip_reading_prefix_cache          # no prompt logprobs
    False
    >>> SamplingParams(max_tokens=8, prompt_logprobs=0).skip_reading_prefix_cache
    True
    >>> LoRARequest("sql-adapter", 1).adapter_id
    1
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = [
    "ConstantList",
    "LoRARequest",
    "MultiModalFeatureSpec",
    "PlaceholderRange",
    "PoolingParams",
    "SamplingParams",
]

T = TypeVar("T")


@dataclass
class SamplingParams:
    """What Request reads from vLLM's SamplingParams.

    Mirrors: vllm/sampling_params.py::SamplingParams (``__post_init__``: prompt_logprobs True
    -> 1; skip_reading_prefix_cache None -> ``prompt_logprobs is not None``, because prompt
    logprobs need every prompt token computed).

    Attributes:
        max_tokens: Most tokens to generate (tokens).
        prompt_logprobs: Logprobs per prompt token, or None.
        extra_args: Free-form; ``extra_args["kv_transfer_params"]`` is read by Request.
        skip_reading_prefix_cache: Don't use prefix-cache hits for this request.
        structured_outputs: Always None in kvlab (no grammar support).

    Raises:
        ValueError: If max_tokens is not a positive int.
    """

    max_tokens: int = 16
    prompt_logprobs: int | None = None
    extra_args: dict[str, Any] | None = None
    skip_reading_prefix_cache: bool | None = None
    structured_outputs: None = None

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if self.prompt_logprobs is True:
            self.prompt_logprobs = 1
        if self.skip_reading_prefix_cache is None:
            self.skip_reading_prefix_cache = self.prompt_logprobs is not None


@dataclass
class PoolingParams:
    """What Request reads from vLLM's PoolingParams (a pooling request generates 1 token).

    Mirrors: vllm/pooling_params.py::PoolingParams. vLLM fills skip_reading_prefix_cache
    when the params are verified against the model (True for token_embed / token_classify
    tasks); kvlab has no model config, so it is taken as given.

    Attributes:
        task: The pooling task name, or None.
        skip_reading_prefix_cache: Don't use prefix-cache hits for this request.
    """

    task: str | None = None
    skip_reading_prefix_cache: bool | None = None


@dataclass(frozen=True)
class LoRARequest:
    """A LoRA adapter; its name enters every block hash of the request.

    Mirrors: vllm/lora/request.py::LoRARequest (name/adapter_id/path properties).

    Attributes:
        lora_name: Adapter name (hashed into block keys).
        lora_int_id: Globally unique id, >= 1 (BlockStored.lora_id).
        lora_path: Where the adapter lives (informational here).

    Raises:
        ValueError: If lora_int_id < 1.
    """

    lora_name: str
    lora_int_id: int
    lora_path: str = "-"

    def __post_init__(self) -> None:
        if self.lora_int_id < 1:
            raise ValueError(f"id must be > 0, got {self.lora_int_id}")

    @property
    def adapter_id(self) -> int:
        return self.lora_int_id

    @property
    def name(self) -> str:
        return self.lora_name

    @property
    def path(self) -> str:
        return self.lora_path


@dataclass(frozen=True)
class PlaceholderRange:
    """Where a multimodal item's placeholder tokens sit in the prompt.

    Mirrors: vllm/multimodal/inputs.py::PlaceholderRange (without is_embed).

    Attributes:
        offset: First placeholder token (token index).
        length: Placeholder tokens (tokens).
    """

    offset: int
    length: int

    def __post_init__(self) -> None:
        if self.offset < 0 or self.length <= 0:
            raise ValueError(
                f"need offset >= 0 and length > 0, got offset={self.offset} length={self.length}"
            )

    def get_num_embeds(self) -> int:
        """Embeddings the encoder produces for the item (= length here)."""
        return self.length


@dataclass(frozen=True, kw_only=True)
class MultiModalFeatureSpec:
    """One multimodal item (image, audio, ...) of a request, as block hashing sees it.

    Mirrors: vllm/multimodal/inputs.py::MultiModalFeatureSpec (same field names; keyword-only
    here; ``data`` is kept but never read: kvlab runs no encoder).

    Attributes:
        identifier: The item's content hash (the mm_hash), hashed into block keys.
        mm_position: Its placeholder range in the prompt.
        modality: "image", "audio", ... (informational).
        data: The processed item, or None.
        mm_hash: The processor-cache hash, or None.
    """

    identifier: str
    mm_position: PlaceholderRange
    modality: str = "image"
    data: Any = None
    mm_hash: str | None = None


class ConstantList(Sequence, Generic[T]):
    """A read-only view of a list that the Request keeps appending to.

    Mirrors: vllm/v1/utils.py::ConstantList (mutators raise TypeError; slices are lists).
    Differs: compares equal to a list with the same items (vLLM's compares by identity).
    """

    def __init__(self, x: list[T]) -> None:
        self._x = x

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Cannot modify a constant list")

    append = extend = insert = pop = remove = clear = __setitem__ = __delitem__ = _read_only

    def index(self, item: T, start: int = 0, stop: int | None = None) -> int:
        return self._x.index(item, start, stop if stop is not None else len(self._x))

    def __getitem__(self, item):
        return self._x[item]

    def __iter__(self) -> Iterator[T]:
        return iter(self._x)

    def __contains__(self, item: object) -> bool:
        return item in self._x

    def __len__(self) -> int:
        return len(self._x)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ConstantList):
            return self._x == other._x
        return self._x == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ConstantList({self._x})"

    def copy(self) -> list[T]:
        return self._x.copy()
