"""Vulkan numbers the ``vulkan`` package does not name (or names only as KHR aliases), and the
layouts and barriers the emulated HAL uses on every device."""

from __future__ import annotations

import numpy as np

WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF
COMPUTE = 0x20  # VK_SHADER_STAGE_COMPUTE_BIT
STORAGE_BUFFER = 7
UPDATE_INLINE_LIMIT = 65536  # vkCmdUpdateBuffer's maximum

# Buffer device addresses (Vulkan 1.2 core), spelled out: the ``vulkan`` package only names the KHR aliases.
BUFFER_USAGE_SHADER_DEVICE_ADDRESS = 0x20000
MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x2
STYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000
STYPE_BUFFER_DEVICE_ADDRESS_INFO = 1000244001
# iree_hal_vulkan_bda_dispatch_root_v1_t: binding_table_address, constants_address (u64, zero),
# binding_base, constant_base, flags, reserved0 (u32, zero): 32 bytes.
BDA_ROOT_V1 = np.dtype(
    [
        ("binding_table_address", "<u8"),
        ("constants_address", "<u8"),
        ("binding_base", "<u4"),
        ("constant_base", "<u4"),
        ("flags", "<u4"),
        ("reserved0", "<u4"),
    ]
)

# execution_barrier: compute and transfer writes → compute, transfer and indirect-argument reads.
STAGES = 0x800 | 0x1000 | 0x2  # COMPUTE_SHADER | TRANSFER | DRAW_INDIRECT
SRC_ACCESS = 0x40 | 0x1000  # SHADER_WRITE | TRANSFER_WRITE
DST_ACCESS = (
    0x20 | 0x40 | 0x800 | 0x1000 | 0x1
)  # SHADER_READ|WRITE, TRANSFER_READ|WRITE, INDIRECT_COMMAND_READ
