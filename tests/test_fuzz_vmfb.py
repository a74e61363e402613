"""Mutated modules end in a parsed module (fully disassembled with source locations, executables
described) or one VmfbFormatError, each case under a time and memory limit."""

from __future__ import annotations

from lens_fuzz.bounded import Limits, run_cases
from lens_fuzz.mutate import module_cases
from lens_fuzz.readers import READERS, read_everything

from engine.runtime.vmfb.module import open_vmfb


def test_fuzz_sample_modules(compiled, tmp_path):
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
    report = run_cases(
        READERS["vmfb"],
        module_cases(samples, cases=2000, seed=1234),
        limits=Limits(seconds=20.0, memory_bytes=1 << 30),
        corpus_dir=tmp_path,
    )
    assert not report.failures, "\n".join(f"{f.kind}: {f.command}\n{f.detail}" for f in report.failures[:3])
    assert report.parsed > 0 and report.rejected > 0  # both ends are reached
    assert report.parsed + report.rejected == report.cases == 2000
