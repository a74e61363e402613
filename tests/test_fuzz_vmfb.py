"""Mutated modules end in a parsed module (fully disassembled, executables listed) or one VmfbFormatError."""

from __future__ import annotations

from engine.runtime.vmfb.fuzzing import FuzzFailure, campaign, read_everything
from engine.runtime.vmfb.module import open_vmfb


def test_fuzz_sample_modules(compiled):
    samples = {}
    for sample, target in [
        ("mlp", "llvm-cpu"),
        ("control_flow", "vmvx"),
        ("globals", "vulkan-spirv"),
        ("softmax", "vmvx"),
    ]:
        path = compiled.path(sample, target)
        samples[path.name] = path.read_bytes()
        for x in open_vmfb(path).executables:
            if x.format == "vmvx-bytecode-fb":
                samples[f"{path.name}:{x.name}"] = bytes(x.data)
    for data in samples.values():
        assert read_everything(data) > 0  # the unmutated modules read cleanly
    outcomes = list(campaign(samples, cases=2500, seed=1234))
    failures = [o for *_, o in outcomes if isinstance(o, FuzzFailure)]
    assert not failures, failures[0].error
    kinds = {o for *_, o in outcomes}
    assert kinds == {"ok", "error"}  # both ends are reached
