"""A sequence as nano-vllm's BlockManager sees it: token ids, a block table, cached tokens.

Mirrors: nanovllm/engine/sequence.py::Sequence (nano-vllm 82f5ca2), reduced to what the
BlockManager reads (sampling parameters, status and completion bookkeeping are left to the
caller, e.g. ``kvlab.compare.driver``).
Differs: a string ``request_id`` (kvlab's name for what nano-vllm calls ``seq_id``) and the
block size is a constructor argument (nano-vllm keeps it as a class attribute).

Blocks are cut from the token list by position; the last one may be partial::

    token_ids   [t0 t1 t2 t3][t4 t5 t6 t7][t8 t9]      block_size 4
    block(i)     block(0)     block(1)     block(2)    num_blocks 3, last_block_num_tokens 2

Examples:
    >>> seq = NanoSequence("r0", list(range(10)), block_size=4)
    >>> seq.num_blocks, seq.block(2), seq.last_block_num_tokens
    (3, [8, 9], 2)
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["NanoSequence"]


class NanoSequence:
    """One request's tokens and the blocks nano-vllm's BlockManager gave it.

    Mirrors: nanovllm/engine/sequence.py::Sequence (token_ids, num_tokens, num_prompt_tokens,
    num_cached_tokens, block_table, num_blocks, last_block_num_tokens, block, append_token).

    Args:
        request_id: Unique id of the request.
        token_ids: The prompt (token ids), at least one.
        block_size: Tokens per KV block (tokens), >= 1.

    Attributes:
        block_table: Logical block i -> block_id, filled by ``NanoBlockManager.allocate`` and
            ``may_append``.
        num_cached_tokens: Prefix-cache hit of the last ``allocate`` (tokens, a multiple of
            block_size); reset to 0 by ``deallocate``.

    Raises:
        ValueError: If the prompt is empty or block_size < 1.
        TypeError: If a token id is not an int.
    """

    def __init__(self, request_id: str, token_ids: Iterable[int], block_size: int) -> None:
        tokens = list(token_ids)
        if not tokens:
            raise ValueError(f"sequence {request_id!r}: token_ids must hold at least one token")
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be an int >= 1 (tokens), got {block_size!r}")
        bad = [t for t in tokens if isinstance(t, bool) or not isinstance(t, int)]
        if bad:
            raise TypeError(f"sequence {request_id!r}: token ids must be ints, got {bad[:3]!r}")
        self.request_id = str(request_id)
        self.block_size = block_size
        self.token_ids: list[int] = tokens
        self.num_prompt_tokens = len(tokens)
        self.num_cached_tokens = 0
        self.block_table: list[int] = []

    def __len__(self) -> int:
        """num_tokens (tokens)."""
        return len(self.token_ids)

    def __getitem__(self, key: int | slice) -> int | list[int]:
        return self.token_ids[key]

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens (tokens)."""
        return len(self.token_ids)

    @property
    def num_completion_tokens(self) -> int:
        """Generated tokens (tokens)."""
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def num_blocks(self) -> int:
        """Blocks needed to hold every token (blocks): ceil(num_tokens / block_size)."""
        return -(-len(self.token_ids) // self.block_size)

    @property
    def num_cached_blocks(self) -> int:
        """Blocks of the prefix-cache hit (blocks)."""
        return self.num_cached_tokens // self.block_size

    @property
    def last_block_num_tokens(self) -> int:
        """Tokens in the last block (tokens), 1..block_size."""
        return len(self.token_ids) - (self.num_blocks - 1) * self.block_size

    def block(self, i: int) -> list[int]:
        """The token ids of logical block ``i`` (the last one may be partial).

        Raises:
            IndexError: If ``i`` is not in [0, num_blocks).
        """
        if not 0 <= i < self.num_blocks:
            raise IndexError(f"block index {i} out of range [0, {self.num_blocks})")
        return self.token_ids[i * self.block_size : (i + 1) * self.block_size]

    def append_token(self, token_id: int) -> None:
        """Append one generated token.

        Raises:
            TypeError: If ``token_id`` is not an int.
        """
        if isinstance(token_id, bool) or not isinstance(token_id, int):
            raise TypeError(f"token_id must be an int, got {token_id!r}")
        self.token_ids.append(token_id)

    def __repr__(self) -> str:
        return (
            f"NanoSequence(request_id={self.request_id!r}, num_tokens={self.num_tokens}, "
            f"block_table={self.block_table}, num_cached_tokens={self.num_cached_tokens})"
        )
