"""Compute kernels that are right only when one workgroup is one subgroup: they share workgroup memory or
reduce across their subgroup, and never synchronise the workgroup (no barrier anywhere).

IREE 3.13's SPIR-V sometimes keeps accumulators in workgroup memory (``Workgroup`` storage) with no
``OpControlBarrier``/``OpMemoryBarrier``: one invocation zeroes a slot another accumulates into, or every
invocation read-modify-writes the same slots. Inside one subgroup the invocations run in lock step and the
result comes out right; a workgroup larger than the device's subgroup is several subgroups scheduled
independently, and the result then depends on their timing. Measured (``benchmarks/vulkan_device_check.py``):
SqueezeNet 1.1 built for IREE's default Vulkan target has 64-invocation workgroups of this kind; lavapipe
gives the right answer every time, an NVIDIA H100 (subgroup 32) a different wrong one on each call, in IREE's
runtime and in the debug engine alike; built with ``--iree-vulkan-target=sm_80`` (32 invocations) it is exact.

The other way round: a build for sm_80 reduces a row with one ``OpGroupNonUniformFAdd`` over a 32-invocation
workgroup, which is the whole row only where the subgroup has 32 invocations. On lavapipe (subgroup 8)
small_cnn's sm_80 build gives the same wrong result in both engines, every time (the pipeline declares no
required subgroup size, so neither runtime can ask for 32).

What is read here are facts about the binary: workgroup memory or subgroup operations, no barrier, the
workgroup size. They are necessary for such a failure, not sufficient: invocations that each touch only
their own slots, or subgroups that each work alone, are right anyway (small_cnn's and attention_block's
flagged kernels gave the same bytes on every call on the H100). A race shows by running again
(``benchmarks/vulkan_device_check.py``: call-to-call repeatability); a partial subgroup reduction by a
comparison with another device or target (``iree-lens diverge``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.dispatch.spirv_types import spirv_instructions

_OP_ENTRY_POINT, _OP_EXECUTION_MODE, _OP_VARIABLE = 15, 16, 59
# OpGroupNonUniformElect .. OpGroupNonUniformQuadSwap, and the KHR subgroup ballot/first/rotate forms.
_SUBGROUP_OPS = frozenset(range(333, 367)) | {4421, 4422, 4431}
_OP_CONTROL_BARRIER, _OP_MEMORY_BARRIER = 224, 225
_EXECUTION_MODEL_GLCOMPUTE = 5
_MODE_LOCAL_SIZE = 17
_STORAGE_WORKGROUP = 4


@dataclass(frozen=True)
class UnsynchronisedWorkgroup:
    """A compute entry point whose module shares workgroup memory or uses subgroup operations and has no
    barrier, and its workgroup size."""

    entry_point: str
    local_size: tuple[int, int, int]
    workgroup_memory: bool = True
    subgroup_operations: bool = False

    @property
    def invocations(self) -> int:
        x, y, z = self.local_size
        return x * y * z

    def subgroups(self, subgroup_size: int) -> int:
        """How many subgroups one workgroup spans on a device with ``subgroup_size`` (0: unknown -> 0)."""
        return -(-self.invocations // subgroup_size) if subgroup_size > 0 else 0

    def spans_subgroups(self, subgroup_size: int) -> bool:
        """True when one workgroup is several subgroups of such a device (unknown subgroup size: True): then
        nothing orders one subgroup's workgroup-memory accesses against another's, and a subgroup operation
        covers part of the workgroup."""
        return self.invocations > 1 and (subgroup_size <= 0 or self.invocations > subgroup_size)

    def describe(self, subgroup_size: int = 0) -> str:
        x, y, z = self.local_size
        where = (
            f", {self.subgroups(subgroup_size)} subgroups of {subgroup_size} on this device"
            if subgroup_size > 0
            else ""
        )
        what = " and ".join(
            w
            for w, present in (
                ("shares workgroup memory", self.workgroup_memory),
                ("uses subgroup operations", self.subgroup_operations),
            )
            if present
        )
        return f"{self.entry_point}: workgroup {x}x{y}x{z} ({self.invocations} invocations{where}) {what} with no barrier"


def unsynchronised_workgroups(words: np.ndarray) -> list[UnsynchronisedWorkgroup]:
    """The compute entry points of a SPIR-V module (its words) that run more than one invocation per
    workgroup, where the module declares workgroup memory or uses subgroup operations and has no barrier
    instruction at all.

    A malformed or truncated module gives what was read before the damage, never an error."""
    w = np.asarray(words, dtype=np.uint32)
    names: dict[int, str] = {}
    sizes: dict[int, tuple[int, int, int]] = {}
    shared = subgroup = barrier = False
    for op, inst in spirv_instructions(w):
        count = len(inst)
        if op == _OP_ENTRY_POINT and count >= 4 and int(inst[1]) == _EXECUTION_MODEL_GLCOMPUTE:
            raw = inst[3:].tobytes()
            names[int(inst[2])] = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
        elif op == _OP_EXECUTION_MODE and count >= 6 and int(inst[2]) == _MODE_LOCAL_SIZE:
            sizes[int(inst[1])] = (int(inst[3]), int(inst[4]), int(inst[5]))
        elif op == _OP_VARIABLE and count >= 4 and int(inst[3]) == _STORAGE_WORKGROUP:
            shared = True
        elif op in _SUBGROUP_OPS:
            subgroup = True
        elif op in (_OP_CONTROL_BARRIER, _OP_MEMORY_BARRIER):
            barrier = True
    if not (shared or subgroup) or barrier:
        return []
    found = [UnsynchronisedWorkgroup(names[e], sizes[e], shared, subgroup) for e in names if e in sizes]
    return [f for f in found if f.invocations > 1]


def module_unsynchronised_workgroups(module) -> dict[str, UnsynchronisedWorkgroup]:
    """:func:`unsynchronised_workgroups` of every Vulkan executable of an opened ``.vmfb``
    (``engine.runtime.vmfb.module.open_vmfb``), by entry point name. Other executables are left out."""
    from engine.runtime.vmfb.vke1 import read_vke1

    found: dict[str, UnsynchronisedWorkgroup] = {}
    for exe in module.executables:
        if exe.format.startswith("vulkan-spirv"):
            for shader in read_vke1(bytes(exe.data)).shader_modules:
                found.update((f.entry_point, f) for f in unsynchronised_workgroups(shader.spirv))
    return found


def race_note(module, entry_point: str, side: str = "B") -> str | None:
    """The diverge note for a culprit kernel so flagged in ``module`` (None when it is not)."""
    try:
        found = module_unsynchronised_workgroups(module).get(entry_point)
    except Exception:  # noqa: BLE001 - a note is a hint: a module the reader cannot parse gives none
        return None
    if found is None:
        return None
    return (
        f"{side}'s {found.describe()}: it is right only where a workgroup is one subgroup; on a device whose "
        f"subgroup is smaller than {found.invocations} invocations "
        + ("its result can change from run to run (a race in the compiled kernel, not rounding)"
           if found.workgroup_memory else "a subgroup operation covers part of the workgroup")
        + "; run diverge again, or build for this device's Vulkan target (--iree-vulkan-target)"
    )  # fmt: skip


def partial_subgroup_warning(module, subgroup_size: int, device: str) -> str | None:
    """What to say before running ``module`` on ``device``, whose subgroups have ``subgroup_size`` invocations:
    its kernels that use subgroup operations with no barrier over a workgroup of several such subgroups (a build
    for a GPU with larger subgroups, ``--iree-vulkan-target=rdna3`` run on lavapipe's 8): each operation then
    covers part of the workgroup, and the result is wrong unless each subgroup works alone, in IREE's runtime
    too. Kernels that only share workgroup memory are not named here: IREE's default build has many that
    lavapipe runs right (a race shows by running again, not by reading the binary). None when there are none,
    or the subgroup size is not known."""
    if subgroup_size <= 0:
        return None
    try:
        found = module_unsynchronised_workgroups(module)
    except Exception:  # noqa: BLE001 - a warning is a hint: a module the reader cannot parse gives none
        return None
    partial = [f for f in found.values() if f.subgroup_operations and f.spans_subgroups(subgroup_size)]
    if not partial:
        return None
    more = f" (and {len(partial) - 1} more)" if len(partial) > 1 else ""
    return (
        f"{partial[0].describe(subgroup_size)}{more}: its subgroup operations each cover part of the workgroup on "
        f"{device}, whose subgroup is {subgroup_size} invocations, so its results may be wrong here (in IREE's "
        "runtime too); the build targets a GPU with larger subgroups: build for this device, or compare with a "
        "CPU build (iree-lens diverge)"
    )
