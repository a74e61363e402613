"""Rebuilding a plain ``.vmfb``'s executable sources (engine/dispatch/rebuild_sources.py): the rebuild tries the
CPUs a user's module most likely came from (IREE's default, ``host``, then the CPU it records), keeps sources only when the
executables are byte for byte the module's, and a try whose first dumped binary differs stops there and
says which executable differed. Real programs compiled with the real iree-compile; the executables compared
are read from the .vmfb files, independently of the rebuild."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import iree_compile

from engine.dispatch.rebuild_sources import rebuild_sources
from engine.runtime.vmfb.module import open_vmfb

PROGRAM = Path(__file__).parent / "session_programs" / "nan_log.mlir"
CPU = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu"]


def build(out: Path, *flags: str) -> Path:
    # The program by its absolute path: the module's debug locations name it so, and the rebuild finds it.
    proc = iree_compile([str(PROGRAM.resolve()), *CPU, *flags, "-o", str(out)],
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def executables(vmfb: Path) -> dict[str, bytes]:
    return {e.name: bytes(e.data) for e in open_vmfb(vmfb).executables}


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("rebuild")
    return {
        "default": build(out / "default.vmfb"),
        "host": build(out / "host.vmfb", "--iree-llvmcpu-target-cpu=host"),
        "generic": build(out / "generic.vmfb", "--iree-llvmcpu-target-cpu=generic"),
    }


def test_the_three_builds_differ(modules):
    # The premise: each CPU gives other kernels (else the test below would prove nothing).
    default, host, generic = (executables(modules[k]) for k in ("default", "host", "generic"))
    assert default != host and default != generic


@pytest.mark.parametrize("cpu", ["default", "host", "generic"])
def test_a_module_built_for_a_cpu_the_rebuild_tries_gets_typed(modules, tmp_path, cpu):
    # generic: neither IREE's default nor host; the third try is the CPU and features the module records.
    found = rebuild_sources(modules[cpu], cache_dir=tmp_path / "cache")
    assert found.found and found.origin == "rebuilt", found.note
    assert "identical" in found.note


def test_a_module_no_try_rebuilds_is_refused_naming_what_differed(tmp_path):
    # Built for generic with other flags: no try, the module's own CPU's included, gives its executables.
    vmfb = build(tmp_path / "flags.vmfb", "--iree-llvmcpu-target-cpu=generic", "--iree-llvmcpu-debug-symbols=false")
    found = rebuild_sources(vmfb, cache_dir=tmp_path / "cache")
    assert not found.found
    [name] = executables(vmfb)
    # The three tries are named; the first was judged on its first dumped binary.
    assert "IREE's default CPU: executable " + name + " differs" in found.note, found.note
    assert "target CPU host" in found.note and "not used" in found.note
    assert "target CPU generic with the module's recorded features" in found.note
    assert "other flags or another IREE" in found.note
    # The verdict is kept: asking again answers at once, without compiling.
    again = rebuild_sources(vmfb, cache_dir=tmp_path / "cache")
    assert again.note == found.note


def test_two_rebuilds_of_one_module_at_once_both_get_the_sources(modules, tmp_path):
    # Two sessions of the same module (two windows, two test workers) share the rebuild's cache folder. Before
    # the folder was locked, the second emptied the first's half-done rebuild and one of them answered untyped.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: rebuild_sources(modules["host"], cache_dir=tmp_path / "cache"), range(2)))
    for found in both:
        assert found.found and found.origin == "rebuilt", found.note
    assert both[0].files == both[1].files


@pytest.mark.parametrize("opened_from", ["the program's folder", "elsewhere"])
def test_a_module_compiled_by_a_relative_path_is_rebuilt_byte_for_byte(tmp_path, monkeypatch, opened_from):
    # ``iree-compile model.mlir -o model.vmfb`` in the model's folder, the way most people compile: the kernels'
    # debug information names ``model.mlir`` as given. The rebuild named it by its absolute path, so every such
    # module read "gives other executables" and its tensors stayed untyped.
    folder = tmp_path / "build"
    folder.mkdir()
    (folder / "nan_log.mlir").write_text(PROGRAM.read_text())
    proc = iree_compile(["nan_log.mlir", *CPU, "--iree-llvmcpu-target-cpu=host", "-o", "nan_log.vmfb"],
                        cwd=folder, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    # The premise: the same program named by its absolute path compiles to other bytes.
    proc = iree_compile([str(folder / "nan_log.mlir"), *CPU, "--iree-llvmcpu-target-cpu=host", "-o",
                         str(tmp_path / "absolute.vmfb")], text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert executables(folder / "nan_log.vmfb") != executables(tmp_path / "absolute.vmfb")
    monkeypatch.chdir(folder if opened_from == "the program's folder" else tmp_path)
    found = rebuild_sources(folder / "nan_log.vmfb", cache_dir=tmp_path / "cache")
    assert found.found and found.origin == "rebuilt", found.note
    assert "identical" in found.note


def recorded_cpu(vmfb: Path) -> str:
    """The CPU a module's host code names in its device target (read here with a plain regex)."""
    import re

    return re.search(rb'"embedded-elf-x86_64", \{cpu = "([^"]*)"', vmfb.read_bytes())[1].decode()


def test_a_module_built_on_another_machine_is_rebuilt_for_the_cpu_it_records(modules, tmp_path):
    # A module compiled with --iree-llvmcpu-target-cpu=host on another machine records that machine's CPU and
    # features; neither IREE's default nor this machine's host rebuilds it, so it stayed untyped. The third try
    # builds for what it records. Another machine's host build is a build for its CPU by name.
    here = recorded_cpu(modules["host"])
    # Another CPU whose code differs from this host's (an AVX-512 host builds this small kernel for
    # skylake-avx512 byte for byte as for itself): the first of these that does.
    for other in [c for c in ("skylake-avx512", "znver3", "haswell", "x86-64-v2") if c != here]:
        vmfb = build(tmp_path / f"other-{other}.vmfb", f"--iree-llvmcpu-target-cpu={other}")
        if executables(vmfb) != executables(modules["host"]):
            break
    assert recorded_cpu(vmfb) == other and executables(vmfb) != executables(modules["host"]), other
    found = rebuild_sources(vmfb, cache_dir=tmp_path / "cache")
    assert found.found and "identical" in found.note, found.note
    # A module built for this machine's CPU that differs for another reason (other flags) is refused.
    flagged = build(tmp_path / "flags.vmfb", "--iree-llvmcpu-target-cpu=host", "--iree-llvmcpu-debug-symbols=false")
    assert recorded_cpu(flagged) == here and executables(flagged) != executables(modules["host"])
    note = rebuild_sources(flagged, cache_dir=tmp_path / "cache_flags").note
    assert "other flags or another IREE" in note and "recorded features" not in note, note


def test_a_wait_for_the_rebuild_ends_when_given_up_and_closing_kills_it(tmp_path):
    """The reference engine's first NaN check waits for the sources' rebuild (minutes on a large model): the
    user's Stop gives the wait up at once (the rebuild goes on, for the next check), and closing the session
    kills its compiler. A program no earlier rebuild has seen (its own constant), so the rebuild really runs."""
    import time
    import uuid

    from engine.dispatch.rebuild_sources import SessionSources

    program = tmp_path / "fresh.mlir"
    scale = 1 + uuid.uuid4().int % 10_000 / 1e6  # bytes no cached rebuild has
    program.write_text(PROGRAM.read_text().replace("%sq = arith.mulf %l, %l", f"%c = arith.constant dense<{scale}> : "
                       "tensor<4x8xf32>\n  %m = arith.mulf %l, %c : tensor<4x8xf32>\n  %sq = arith.mulf %m, %l"))  # fmt: skip
    module = tmp_path / "fresh.vmfb"
    proc = iree_compile([str(program), *CPU, "-o", str(module)], text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    told: list[str] = []
    sources = SessionSources(module, tell=told.append)
    sources.ensure()
    assert sources.thread and sources.thread.is_alive()  # the rebuild runs
    started = time.monotonic()
    assert sources.wait(lambda: True) is False  # given up
    assert time.monotonic() - started < 1.0 and sources.thread.is_alive()
    sources.close(timeout=30)
    assert not sources.thread.is_alive() and not sources.sources.found
