"""Mamba (state-space) layers: a request needs only the state after its last computed token.

With prefix caching a block holds the state at the end of that block; a hit is the last
cached state, and everything before it is padding (null blocks). In ``"align"`` mode one
running-state block plus ``num_speculative_blocks`` are kept per step and the state block
of two steps ago is freed.

Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kvlab.core.kv_cache_interface import KVCacheSpec, MambaSpec
from kvlab.core.managers.base import SingleTypeKVCacheManager, cdiv

if TYPE_CHECKING:
    from kvlab.core.block_pool import BlockPool
    from kvlab.core.kv_cache_utils import BlockHashList, BlockHashWithGroupId, KVCacheBlock
    from kvlab.core.request import Request

__all__ = ["MambaManager"]


class MambaManager(SingleTypeKVCacheManager):
    """Mamba layers.

    Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager. In align mode a block
    moves from index ``j`` to the tail of ``req_to_blocks`` (speculative-block reuse); kvlab
    reports that as ``req_blocks_add`` of the block followed by ``req_blocks_null`` of ``j``
    (no ref_cnt change), the same order vLLM applies the two list updates.

    Args:
        kv_cache_spec: A MambaSpec (``mamba_cache_mode``, ``num_speculative_blocks``).
        block_pool: The shared pool.
        **kwargs: The base class's other arguments.
    """

    def __init__(self, kv_cache_spec: MambaSpec, block_pool: BlockPool, **kwargs: Any) -> None:
        super().__init__(kv_cache_spec, block_pool, **kwargs)
        # Hashes of blocks cached during the current step: other requests may not hit them yet.
        self.cached_blocks_this_step: set[BlockHashWithGroupId] = set()
        self.mamba_cache_mode = kv_cache_spec.mamba_cache_mode
        self.num_speculative_blocks: int = kv_cache_spec.num_speculative_blocks
        if self.mamba_cache_mode == "align":
            # request id -> index of the state block allocated in the previous step
            self.last_state_block_idx: dict[str, int] = {}
            self._allocated_block_reqs: set[str] = set()

    @classmethod
    def find_longest_cache_hit(
        cls,
        block_hashes: BlockHashList,
        max_length: int,
        kv_cache_group_ids: list[int],
        block_pool: BlockPool,
        kv_cache_spec: KVCacheSpec,
        use_eagle: bool,
        alignment_tokens: int,
        dcp_world_size: int = 1,
        pcp_world_size: int = 1,
    ) -> tuple[list[KVCacheBlock], ...]:
        """Right to left: the first cached (and aligned) block ``i`` is the hit, padded with
        ``i`` null blocks in front. ``use_eagle`` is ignored, as in vLLM. See the base class.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.find_longest_cache_hit

        Raises:
            TypeError: ``kv_cache_spec`` is not a MambaSpec.
            ValueError: ``dcp_world_size`` or ``pcp_world_size`` is not 1.
        """
        if not isinstance(kv_cache_spec, MambaSpec):
            raise TypeError(f"MambaManager serves MambaSpec, not {type(kv_cache_spec).__name__}")
        if dcp_world_size != 1 or pcp_world_size != 1:
            raise ValueError("Mamba does not support DCP/PCP (world sizes must be 1)")
        computed_blocks: tuple[list[KVCacheBlock], ...] = tuple([] for _ in kv_cache_group_ids)
        block_size = kv_cache_spec.block_size
        for i in range(max_length // block_size - 1, -1, -1):
            cached_block = block_pool.get_cached_block(block_hashes[i], kv_cache_group_ids)
            if not cached_block:
                continue
            if block_size != alignment_tokens and (i + 1) * block_size % alignment_tokens != 0:
                continue
            for computed, cached in zip(computed_blocks, cached_block):
                # Pad so that hit length == len(blocks) * block_size, like the other types.
                computed.extend([block_pool.null_block] * i)
                computed.append(cached)
            break
        return computed_blocks

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Free states no longer needed; in align mode also the state block of two steps ago.

        Draft tokens counted in ``num_computed_tokens`` may be rejected later, so
        ``num_speculative_blocks`` tokens are subtracted first (as vLLM does).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.remove_skipped_blocks
        """
        num_computed_tokens = max(0, num_computed_tokens - self.num_speculative_blocks)
        super().remove_skipped_blocks(request_id, num_computed_tokens)
        if self.mamba_cache_mode != "align":
            return
        last_state_block_idx = self.last_state_block_idx.get(request_id)
        if (
            last_state_block_idx is None
            or last_state_block_idx >= cdiv(num_computed_tokens, self.block_size) - 1
        ):
            return
        blocks = self._req_blocks_for_update(request_id)
        if blocks[last_state_block_idx] != self._null_block:
            self.block_pool.free_blocks([blocks[last_state_block_idx]])
            blocks[last_state_block_idx] = self._null_block
            rec = self.recorder
            if rec is not None:
                rec.req_blocks_null(request_id, self.kv_cache_group_id, [last_state_block_idx])

    def get_num_common_prefix_blocks(self, running_request_id: str) -> int:
        """Always 0: cascade attention does not apply to Mamba."""
        return 0

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        num_tokens_main_model: int,
        apply_admission_cap: bool = False,
    ) -> int:
        """As the base class, plus speculative blocks; align mode asks for at most one
        running-state block (plus the speculative ones on the first prefill).

        A hit on a block cached during this step returns ``num_gpu_blocks + 1`` so the
        request waits a step (its state may not be written yet).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.get_num_blocks_to_allocate
        """
        if (
            len(new_computed_blocks) > 0
            and new_computed_blocks[-1].block_hash in self.cached_blocks_this_step
        ):
            return self.block_pool.num_gpu_blocks + 1
        if self.mamba_cache_mode != "align":
            if self.num_speculative_blocks > 0:
                num_tokens += self.kv_cache_spec.block_size * self.num_speculative_blocks
            return super().get_num_blocks_to_allocate(
                request_id,
                num_tokens,
                new_computed_blocks,
                total_computed_tokens,
                num_tokens_main_model,
                apply_admission_cap=apply_admission_cap,
            )
        # Align mode ignores lookahead tokens: they would break the block alignment.
        num_required_blocks = (
            cdiv(num_tokens_main_model, self.block_size) + self.num_speculative_blocks
        )
        num_req_blocks = len(self._req_blocks_for_update(request_id))
        num_new_blocks = num_required_blocks - len(new_computed_blocks) - num_req_blocks
        if num_new_blocks > 0:
            if request_id in self._allocated_block_reqs:
                num_new_blocks = 1  # the speculative blocks of the last step are reused
            else:
                num_new_blocks = 1 + self.num_speculative_blocks
        return num_new_blocks + self._get_num_evictable_blocks(new_computed_blocks)

    def allocate_new_blocks(
        self, request_id: str, num_tokens: int, num_tokens_main_model: int
    ) -> list[KVCacheBlock]:
        """Allocate state blocks (align mode: pad with nulls, move speculative blocks, add one).

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.allocate_new_blocks
        """
        if self.mamba_cache_mode != "align":
            if self.num_speculative_blocks > 0:
                num_tokens += self.block_size * self.num_speculative_blocks
            return super().allocate_new_blocks(request_id, num_tokens, num_tokens_main_model)
        req_blocks = self._req_blocks_for_update(request_id)
        num_required_blocks = (
            cdiv(num_tokens_main_model, self.block_size) + self.num_speculative_blocks
        )
        if num_required_blocks == len(req_blocks):
            return []
        assert num_required_blocks > len(req_blocks), (
            f"num_required_blocks {num_required_blocks} < len(req_blocks) {len(req_blocks)}"
        )
        prev_block_len = len(req_blocks)
        blocks_allocated = request_id in self._allocated_block_reqs
        if blocks_allocated:
            # The running state lives in the last (1 + num_speculative_blocks) blocks.
            self.last_state_block_idx[request_id] = prev_block_len - 1 - self.num_speculative_blocks
        elif prev_block_len > 0:
            # A new request that hit the cache: its last block holds the hit state.
            self.last_state_block_idx[request_id] = prev_block_len - 1
        num_skipped_blocks = num_required_blocks - self.num_speculative_blocks - 1
        rec = self.recorder
        if prev_block_len < num_skipped_blocks:
            padding = [self._null_block] * (num_skipped_blocks - prev_block_len)
            req_blocks.extend(padding)
            if rec is not None:
                rec.req_blocks_add(
                    request_id, self.kv_cache_group_id, [b.block_id for b in padding]
                )
        if blocks_allocated:
            self._move_speculative_blocks(
                request_id, req_blocks, prev_block_len, num_skipped_blocks
            )
        num_new_blocks = num_required_blocks - len(req_blocks)
        assert num_new_blocks <= (1 if blocks_allocated else self.num_speculative_blocks + 1)
        new_blocks = self.block_pool.get_new_blocks(num_new_blocks)
        req_blocks.extend(new_blocks)
        if rec is not None and new_blocks:
            rec.req_blocks_add(request_id, self.kv_cache_group_id, [b.block_id for b in new_blocks])
        self._allocated_block_reqs.add(request_id)
        return req_blocks[prev_block_len:]

    def _move_speculative_blocks(
        self,
        request_id: str,
        req_blocks: list[KVCacheBlock],
        prev_block_len: int,
        num_skipped_blocks: int,
    ) -> None:
        """Reuse last step's speculative blocks that now fall in the skipped range."""
        rec = self.recorder
        for block_idx in range(prev_block_len - self.num_speculative_blocks, prev_block_len):
            if block_idx >= num_skipped_blocks:
                break
            block = req_blocks[block_idx]
            req_blocks.append(block)
            req_blocks[block_idx] = self._null_block
            if rec is not None:
                rec.req_blocks_add(request_id, self.kv_cache_group_id, [block.block_id])
                rec.req_blocks_null(request_id, self.kv_cache_group_id, [block_idx])

    def free(self, request_id: str) -> None:
        """Release the request's blocks and its align-mode bookkeeping.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.free
        """
        if self.mamba_cache_mode == "align":
            self._allocated_block_reqs.discard(request_id)
            self.last_state_block_idx.pop(request_id, None)
        super().free(request_id)

    def get_num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """All but the last computed token: only the latest state is needed (tokens)."""
        return num_computed_tokens - 1

    def cache_blocks(
        self, request: Request, num_tokens: int, alignment_tokens: int | None = None
    ) -> None:
        """Cache as the base class and remember this step's newly cached hashes.

        Mirrors: vllm/v1/core/single_type_kv_cache_manager.py::MambaManager.cache_blocks
        """
        num_cached_blocks_before = self.num_cached_block.get(request.request_id, 0)
        super().cache_blocks(request, num_tokens, alignment_tokens=alignment_tokens)
        num_cached_blocks_after = self.num_cached_block.get(request.request_id, 0)
        if num_cached_blocks_after <= num_cached_blocks_before:
            return
        for block in self.req_to_blocks[request.request_id][
            num_cached_blocks_before:num_cached_blocks_after
        ]:
            if block.is_null:
                continue
            assert block.block_hash is not None
            self.cached_blocks_this_step.add(block.block_hash)

    def new_step_starts(self) -> None:
        """Forget the hashes cached during the previous step."""
        self.cached_blocks_this_step.clear()
