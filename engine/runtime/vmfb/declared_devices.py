"""The HAL devices a module selects as it loads, read from its initializer.

IREE's compiler gives each device global (``--iree-hal-target-device=device_a=local[0]``, or the one
``__device_0`` of a single-device build) a piece of ``__init`` that enumerates the runtime's devices, takes
the first that matches its target (kind, ordinal, an executable format it runs) and otherwise fails with
"HAL device `NAME` not found or unavailable: #hal.device.target<"KIND", {ordinal = N : index}, [...]>" (or
``#hal.device.select<[...]>`` for a list of alternatives). Those messages are the module's own list of the
devices it needs, in the order it selects them: a multi-device build needs one runtime device for each, as
``iree-run-module --device=... --device=...`` gives them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.runtime.vmfb.decoder import iter_instructions

_NOT_FOUND = re.compile(r"HAL device `(?P<name>[^`]+)` not found or unavailable: (?P<target>#hal\.device\.\w+<.*)", re.S)
_TARGET_KIND = re.compile(r'#hal\.device\.target<"(?P<kind>[\w-]+)"(?:, \{ordinal = (?P<ordinal>\d+))?')

# The device IREE Lens opens for each of IREE's device kinds (a CPU device: IREE's local-sync).
_URI_OF_KIND = {"local": "local-sync", "vulkan": "vulkan", "cuda": "cuda", "hip": "hip"}


@dataclass(frozen=True)
class DeclaredDevice:
    """One device global of a module: its name, the device kinds it accepts (in the order it tries them) and
    which device of its kind it takes (``local[1]``: the second; None: the first that runs its code)."""

    name: str
    kinds: tuple[str, ...]
    ordinal: int | None = None

    def describe(self) -> str:
        """``device_b: local[1]``, ``__device_0: vulkan or local``."""
        kinds = " or ".join(self.kinds) or "a device"
        return f"{self.name}: {kinds}{f'[{self.ordinal}]' if self.ordinal is not None else ''}"

    @property
    def device_uri(self) -> str:
        """The device IREE Lens opens for it (its first kind)."""
        return _URI_OF_KIND.get(self.kinds[0], self.kinds[0]) if self.kinds else "local-sync"


def declared_devices(module) -> list[DeclaredDevice]:
    """The devices ``module`` (a ``VmfbModule``) selects in its initializer, in order; [] for a module with no
    HAL devices (no initializer, a VM-only or inline build) or one whose messages were stripped."""
    init = next((f for f in module.functions if f.name == "__init"), None)
    if init is None:
        return []
    found: dict[str, DeclaredDevice] = {}
    for ins in iter_instructions(init.code):
        if ins.symbol != "Fail" or len(ins.operands) < 2 or not isinstance(ins.operands[1], str):
            continue
        m = _NOT_FOUND.match(ins.operands[1])
        if m is None or m["name"] in found:
            continue
        targets = list(_TARGET_KIND.finditer(m["target"]))
        ordinal = targets[0]["ordinal"] if len(targets) == 1 else None
        kinds = tuple(dict.fromkeys(t["kind"] for t in targets))
        found[m["name"]] = DeclaredDevice(m["name"], kinds, int(ordinal) if ordinal is not None else None)
    return list(found.values())


def several_devices_problem(module, path: str, given: int) -> str | None:
    """The sentence that says a module needs more devices than the ``given`` number, or None when it does not
    (a build for one device, or a module whose devices cannot be read)."""
    devices = declared_devices(module)
    if len(devices) <= given:
        return None
    listed = ", ".join(d.describe() for d in devices)
    return (
        f"{path} was compiled for {len(devices)} devices ({listed}), which it selects one by one as it loads: "
        f"give a device for each, in that order (iree-lens run --device=... --device=..., as iree-run-module "
        f"takes them)"
    )


# IREE's device kinds (``#hal.device.target<"local">``) as IREE Lens's device kinds (``device_kind``).
_LENS_KIND = {"local": "cpu", "vulkan": "vulkan", "cuda": "cuda", "hip": "hip"}


def mismatched_device(module, path: str, uris: list[str]) -> str | None:
    """The sentence that says which of ``uris`` (one per device, in order) is not of a kind its device
    accepts, or None (all fit, the count differs: ``several_devices_problem``'s, or unknown kinds)."""
    from engine.runtime.hal.devices import device_kind

    devices = declared_devices(module)
    if len(devices) != len(uris) or len(uris) < 2:
        return None
    for position, (device, uri) in enumerate(zip(devices, uris), 1):
        kinds = {_LENS_KIND.get(k) for k in device.kinds}
        given = device_kind(uri)
        if None in kinds or given is None or given in kinds:
            continue
        wanted = " or --device=".join(_URI_OF_KIND.get(k, k) for k in device.kinds)
        return (f"--device={uri} (device {position} of {len(uris)}) cannot be {path}'s {device.describe()}: "
                f"give --device={wanted} there, in the order the module selects its devices")  # fmt: skip
    return None
