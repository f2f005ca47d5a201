"""kvlab.worker: the worker side of the paged KV cache (block tables and slot mapping).

Mirrors ``vllm/v1/worker/block_table.py``. Needs numpy; torch only for the optional device
mirrors (``device=...``), so ``import kvlab.worker`` works without torch.
"""

from kvlab.worker.block_table import BlockTable, map_to_kernel_blocks
from kvlab.worker.cpu_gpu_buffer import CpuGpuBuffer
from kvlab.worker.multi_group_block_table import (
    MultiGroupBlockTable,
    align_max_num_blocks,
    default_max_num_blocks,
)
from kvlab.worker.slot_mapping import (
    PAD_SLOT_ID,
    compute_slot_ids,
    query_start_loc_to_req_indices,
)

__all__ = [
    "PAD_SLOT_ID",
    "BlockTable",
    "CpuGpuBuffer",
    "MultiGroupBlockTable",
    "align_max_num_blocks",
    "compute_slot_ids",
    "default_max_num_blocks",
    "map_to_kernel_blocks",
    "query_start_loc_to_req_indices",
]
