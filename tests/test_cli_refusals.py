"""Command lines that must refuse plainly and leave nothing behind (issue 31's kernel-editing loose ends):
``sources`` given a compiled module, a refused ``run --write-replay``, ``--substitute`` of an executable id a
replay does not have."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import compile_for, iree_tool, record_replay

PROGRAM = """func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %r : tensor<8xf32>
}
"""
INPUT = "8xf32=1 2 3 4 5 6 7 8"


def lens(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.launcher", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("refusals") / "square.mlir"
    path.write_text(PROGRAM)
    return path


def test_sources_of_a_compiled_module_asks_for_the_program(program, tmp_path):
    vmfb = compile_for(program, tmp_path / "square.vmfb", "llvm-cpu")
    renamed = tmp_path / "square.bin"  # found by its bytes too, whatever its name
    renamed.write_bytes(vmfb.read_bytes())
    for module in (vmfb, renamed):
        proc = lens("sources", str(module), f"--out={tmp_path / 'out'}")
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "compiled module" in lines[0] and ".mlir" in lines[0], proc.stderr
        assert "unexpected character" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_refused_write_replay_leaves_no_file(program, tmp_path):
    vmfb = compile_for(program, tmp_path / "square_vmvx.vmfb", "vmvx")  # replays of VMVX are not written
    out = tmp_path / "run.ireereplay"
    proc = lens("run", str(vmfb), "--function=main", f"--input={INPUT}", f"--write-replay={out}")
    assert proc.returncode == 1 and "not supported" in proc.stderr
    assert not out.exists()


def test_substitute_of_an_unknown_executable_id_is_refused(program, tmp_path):
    vmfb = compile_for(program, tmp_path / "square.vmfb", "llvm-cpu")
    replay = record_replay(vmfb, "main", [INPUT], tmp_path / "square.ireereplay")
    listing = subprocess.run([iree_tool("iree-dump-replay"), str(replay)], capture_output=True, text=True)
    assert listing.returncode == 0
    binary = tmp_path / "any.so"
    binary.write_bytes(b"\x7fELF")
    proc = lens("run", str(replay), "--substitute=4242=" + str(binary))
    assert proc.returncode == 1
    assert "no executable 4242" in proc.stderr and "its executables are" in proc.stderr, proc.stderr


def test_a_function_called_without_its_inputs_is_one_plain_line_in_every_command(program, tmp_path):
    # Before: compare-builds printed iree-benchmark-module's banner and "expected 1 arguments but passed 0",
    # profile "input list and function mismatch", debug IREE's status code, each differently.
    vmfb = compile_for(program, tmp_path / "square.vmfb", "llvm-cpu")
    (tmp_path / "c.gdb").write_text("continue\n")
    said = "main takes 1 input and none was given: pass it with --input (as iree-run-module takes it)"
    for command, extra, status in (("compare-builds", [str(vmfb)], 2), ("profile", [f"--out={tmp_path / 'p.json'}"], 1),
                                   ("debug", [f"--commands={tmp_path / 'c.gdb'}"], 1),
                                   ("capture", [f"--out={tmp_path / 'bundle'}"], 1)):  # fmt: skip
        proc = lens(command, str(vmfb), "--function=main", *extra)
        assert (proc.returncode, proc.stderr.strip()) == (status, f"iree-lens {command}: {said}"), command
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "bundle").exists()
    proc = lens("profile", str(vmfb), "--function=main", f"--input={INPUT}", f"--out={tmp_path / 'p.json'}")
    assert proc.returncode == 0, proc.stderr  # given its input, the same command runs


@pytest.mark.parametrize("command", ["phases", "sources"])
def test_a_file_that_is_not_a_program_is_named_before_compiling(program, tmp_path, command):
    """phases (and sources) given a .vmfb, a .npy or random bytes printed iree-compile's errors with the file's
    bytes in them; now one line names what the file seems to be, exit status 2, and no folder is written.
    MLIR bytecode still compiles."""
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros(4, np.float32))
    (tmp_path / "noise.bin").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "picture.png").write_bytes(png(2, 2))
    vmfb = compile_for(program, tmp_path / "square.vmfb", "llvm-cpu")
    cases = {
        vmfb: "is a compiled IREE module (.vmfb), not an MLIR program",
        tmp_path / "x.npy": "is a NumPy .npy array, not an MLIR program",
        tmp_path / "noise.bin": "is a binary file, not an MLIR program",
        tmp_path / "picture.png": "is a PNG image, not an MLIR program",
    }
    if command == "sources":
        del cases[vmfb]  # sources says more of a module (test_sources_of_a_compiled_module_asks_for_the_program)
    for path, said in cases.items():
        out = tmp_path / f"out_{path.stem}"
        proc = lens(command, str(path), f"--out={out}")
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == f"iree-lens {command}: {path} {said}" + proc.stderr.strip().split(said, 1)[1]
        assert "\ufffd" not in proc.stderr and len(proc.stderr.splitlines()) == 1
        assert not out.exists()
    source = tmp_path / "square.mlir"
    source.write_text(PROGRAM)
    bytecode = tmp_path / "square.mlirbc"
    subprocess.run([iree_tool("iree-ir-tool"), "cp", str(source), "--emit-bytecode", "-o", str(bytecode)], check=True)
    proc = lens(command, str(bytecode), f"--out={tmp_path / 'from_bytecode'}")
    assert proc.returncode == 0, proc.stderr


def png(width: int, height: int) -> bytes:
    """A grey PNG image, written by hand (zlib and the PNG chunk layout)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@pytest.mark.parametrize("command,name", [("run", "gone.vmfb"), ("inspect", "gone.ireereplay"), ("zones", "gone.json")])
def test_a_missing_file_is_named_first(command, name, tmp_path):
    """As a shell says it: ``cannot open PATH: No such file or directory`` (was "cannot open: No such file or
    directory in PATH"), never a traceback."""
    from support import lens_in_process

    missing = tmp_path / name
    proc = lens_in_process(command, str(missing))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"cannot open {missing}: No such file or directory" in proc.stderr, proc.stderr


def test_a_build_for_another_cpu_is_refused_naming_both_machines(program, tmp_path):
    # Cross-compiled for arm64: no device here runs it; IREE's runtime says only "HAL device not found" with
    # the whole target attribute. Both engines, and capture, say what it was built for and what this is.
    vmfb = compile_for(program, tmp_path / "arm.vmfb", "llvm-cpu", "--iree-llvmcpu-target-triple=aarch64-unknown-linux-gnu")
    for args in (("run", "--engine=debug"), ("run", "--engine=reference"), ("capture", f"--out={tmp_path / 'c'}")):
        proc = lens(args[0], str(vmfb), f"--input={INPUT}", *args[1:])
        assert proc.returncode != 0, args
        message = proc.stderr.strip()
        assert "embedded-elf-arm_64" in message and "this one is x86_64" in message, (args, message)
        assert "not found or unavailable" not in message and len(message.splitlines()) == 1, (args, message)
    assert not (tmp_path / "c").exists()


def test_a_damaged_executable_is_named_as_the_module_names_it(program, tmp_path):
    """An executable that does not load (its ELF header says another machine) is named by the name IREE's
    dump of the module gives its rodata segment, beside its rodata ordinal."""
    vmfb = compile_for(program, tmp_path / "square.vmfb", "llvm-cpu")
    data = bytearray(vmfb.read_bytes())
    elf = data.find(b"\x7fELF")
    data[elf + 18 : elf + 20] = (0xB7).to_bytes(2, "little")  # e_machine: aarch64
    damaged = tmp_path / "damaged.vmfb"
    damaged.write_bytes(bytes(data))
    dump = subprocess.run([iree_tool("iree-dump-module"), str(vmfb)], capture_output=True, text=True, check=True)
    # IREE names the executable in the module's own words: its __init's "does not support any variant" message.
    (name,) = set(re.findall(r"any variant of executable `([^`]+)`", dump.stdout))
    proc = lens("run", str(damaged), f"--input={INPUT}")
    assert proc.returncode != 0
    first = proc.stderr.splitlines()[0]
    assert re.search(rf"cannot load executable rodata \d+ \({re.escape(name)}\): .*ELF machine 183", first), first
