"""Which build a split folder's expected outputs came from, and whether a check is that same build.

``split`` records its build in ``manifest.json`` (``"build"``): the iree-compile flags that chose the target and
options, the runtime device, the compiler's version and the host CPU (``--iree-llvmcpu-target-cpu=host``
means this machine's). ``split --check`` with the same flags, compiler and CPU on the same device (or another
local CPU device: ``local-sync`` and ``local-task`` run the same code) re-runs each dispatch's own kernel on
its recorded inputs, so its results are bit for bit the recorded ones: measured on small_cnn, SqueezeNet 1.1,
EfficientViT-M0 and transformer96, all 1,345 dispatches' occurrences re-ran exactly, on local-sync and on
local-task. Such a check on a local CPU device is judged by a tight rule (``check.SAME_BUILD_EPS``) instead of
the default rounding rule, which is wide enough for another backend's reassociated sums and drift through a
network.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path

CPU_DEVICES = ("local-sync", "local-task")  # one llvm-cpu/VMVX build runs the same code on either


@dataclass(frozen=True)
class SplitBuild:
    """A build of the split's tests: what decides their kernels' code and where they run."""

    flags: tuple[str, ...]
    device: str
    compiler: str
    host: str

    def to_json(self) -> dict:
        return {"flags": list(self.flags), "device": self.device, "compiler": self.compiler, "host": self.host}

    @classmethod
    def from_json(cls, entry) -> SplitBuild | None:
        try:
            return cls(tuple(str(f) for f in entry["flags"]), str(entry["device"]), str(entry["compiler"]),
                       str(entry["host"]))  # fmt: skip
        except (KeyError, TypeError):
            return None

    def differs_from(self, other: SplitBuild) -> str | None:
        """None when ``other`` runs the same code on the same data as this build; else what differs."""
        if sorted(self.flags) != sorted(other.flags):
            split_only = [f for f in other.flags if f not in self.flags]
            here_only = [f for f in self.flags if f not in other.flags]
            return (f"flags: the split's {' '.join(split_only) or 'none other'}, "
                    f"this check's {' '.join(here_only) or 'none other'}")[:300]  # fmt: skip
        if self.compiler != other.compiler:
            return f"another compiler (the split's {other.compiler}, this {self.compiler})"
        if self.host != other.host:
            return "another host CPU"
        if self.device != other.device and not {self.device, other.device} <= set(CPU_DEVICES):
            return f"another device (the split's {other.device}, this {self.device})"
        return None


@functools.cache
def host_cpu() -> str:
    """This machine's CPU as LLVM names it for ``--iree-llvmcpu-target-cpu=host``, with a digest of its features."""
    try:
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features().flatten()
        return f"{platform.machine()} {llvm.get_host_cpu_name()} {hashlib.sha1(features.encode()).hexdigest()[:12]}"
    except Exception:  # noqa: BLE001 - without llvmlite, or an LLVM that cannot say: the machine's name alone
        return f"{platform.machine()} {platform.processor() or 'unknown'}"


def this_build(flags: list[str], device: str) -> SplitBuild:
    """The build ``flags`` make on ``device`` with the installed compiler on this machine."""
    from engine.compiler.job import compiler_version

    return SplitBuild(tuple(flags), device, compiler_version(), host_cpu())


def read_build(folder: Path) -> SplitBuild | None:
    """The build a split folder's expected outputs came from (None for a folder split before it was kept)."""
    try:
        data = json.loads((Path(folder) / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return SplitBuild.from_json(data.get("build")) if isinstance(data, dict) else None
