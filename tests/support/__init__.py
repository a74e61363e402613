"""Helpers shared by test modules (import as ``from support import ...``; conftest modules are not importable
by name reliably, since ``tests/`` and ``tests/app/`` each have one)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.compiler.targets import TARGETS
from engine.runtime import element_types as et
from engine.runtime.function_io import OpaqueRef, Scalar, Tensor
from engine.runtime.vmfb.module import open_vmfb
from engine.samples import sample_path
from support.compile_cache import iree_compile

VENV_BIN = Path(sys.executable).parent


def iree_tool(name: str) -> str:
    """Path of one of IREE's command-line tools installed beside this interpreter."""
    p = VENV_BIN / name
    return str(p) if p.exists() else name


def iree_run_module_stdout(modules, function: str, inputs=(), devices=(), flags=()) -> str:
    """What ``iree-run-module`` prints for ``function`` of the last of ``modules`` (a .vmfb, or several in
    load order: ``--module`` each), on ``devices`` (``--device`` each; none: its default), with its own
    ``flags``; it must succeed."""
    modules = [modules] if isinstance(modules, (str, Path)) else list(modules)
    proc = subprocess.run([iree_tool("iree-run-module"), *[f"--module={m}" for m in modules],
                           *[f"--device={d}" for d in devices], f"--function={function}",
                           *[f"--input={i}" for i in inputs], *flags], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def save_after_each_dispatch(folder: Path, count: int) -> Path:
    """A ``debug`` commands file that stops after each of the first ``count`` dispatches and saves its tensors
    in ``folder/K``, then finishes the call; written in ``folder``, its path returned."""
    lines = []
    for k in range(count):
        lines += [f"break dispatch {k} after", "continue", f"save-tensors {folder / str(k)}"]
    script = folder / "commands.txt"
    script.write_text("\n".join([*lines, "continue", ""]))
    return script


REPO = Path(__file__).resolve().parents[2]  # the repository (this worktree)


def lens_argv() -> list[str]:
    """The installed ``iree-lens`` launcher, or ``python -m app.launcher`` where none is installed."""
    script = VENV_BIN / "iree-lens"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.launcher"]


def lens_env() -> dict[str, str]:
    """This environment with the worktree's code first on PYTHONPATH (so a launcher runs this code)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


def lens_run(
    vmfb, function: str, inputs=(), engine: str = "debug", *extra: str, timeout: float | None = None
):
    """``iree-lens run`` as a user runs it (a separate process), returning the completed process."""
    import subprocess

    cmd = [
        sys.executable,
        "-m",
        "app.launcher",
        "run",
        str(vmfb),
        f"--function={function}",
        f"--engine={engine}",
    ]
    cmd += [f"--input={i}" for i in inputs] + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


# -- IREE HAL replays (.ireereplay) -------------------------------------------------------------------------


def record_replay(vmfb, function: str, inputs, out: Path, device: str = "local-sync") -> Path:
    """``iree-run-module --device_replay_output=out``: IREE's own HAL replay of one call."""
    cmd = [iree_tool("iree-run-module"), f"--device={device}", f"--module={vmfb}", f"--function={function}"]
    cmd += [f"--input={i}" for i in inputs] + [f"--device_replay_output={out}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and device.startswith("vulkan") and _replay_finished(Path(out)):
        # iree-run-module 3.13 on lavapipe often dies in its Vulkan teardown (SIGSEGV, exit 245) after the
        # run and after the recorder finalized the replay (its header holds the final length).
        return Path(out)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:], proc.stdout[-2000:])
    return Path(out)


def _replay_finished(path: Path) -> bool:
    import struct

    if not path.is_file() or path.stat().st_size < 24:
        return False
    with open(path, "rb") as fh:
        length = struct.unpack("<Q", fh.read(24)[16:24])[0]
    return length == path.stat().st_size


def iree_dump_replay_rows(path) -> list[dict]:
    """``iree-dump-replay --format=jsonl``, one parsed row per line."""
    import json

    proc = subprocess.run(
        [iree_tool("iree-dump-replay"), "--format=jsonl", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def iree_run_replay_reading(replay_path, ranges, tmp, device: str = "local-sync") -> list[bytes]:
    """The bytes ``iree-run-replay`` leaves in ``ranges`` ((replay buffer id, offset, length) each) after
    running the replay at ``replay_path`` on ``device``: the replay with records appended that write each
    range to a file (``readback_records``), read back in order."""
    from engine.replay.reader import open_replay
    from engine.replay.writer import readback_records, rewrite_replay

    out = Path(tmp) / f"readback-{device}.bin"
    records, total = readback_records(open_replay(replay_path), ranges, out)
    out.write_bytes(bytes(total))
    copy = rewrite_replay(open_replay(replay_path), Path(tmp) / f"readback-{device}.ireereplay", append=records)
    proc = subprocess.run([iree_tool("iree-run-replay"), f"--device={device}", str(copy)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    data, at, found = out.read_bytes(), 0, []
    for _, _, length in ranges:
        found.append(data[at : at + length])
        at += length
    return found


def iree_traced_tensors(
    vmfb, function: str, args: list[np.ndarray], device: str = "local-sync"
) -> list[tuple[str, list]]:
    """IREE's own traced dispatch tensors (a module built with ``--iree-flow-trace-dispatch-tensors``) read
    with a ``HalModuleDebugSink``, with no engine code: ``(key, arrays)`` in the order IREE traced them."""
    import iree.runtime as rt

    seen: list[tuple[str, list]] = []

    def sink(key, views):
        arrays = []
        for bv in views:
            try:
                dtype = rt.HalElementType.map_to_dtype(bv.element_type)
            except ValueError:  # a type numpy lacks (i4 packed two to a byte): its bytes
                arrays.append(np.array(bv.map().asarray([int(bv.byte_length)], np.dtype(np.uint8)), copy=True))
                continue
            arrays.append(np.array(bv.map().asarray(bv.shape, dtype), copy=True))
        seen.append((key, arrays))

    instance = rt.VmInstance()
    hal_device = rt.get_device(device, cache=False)  # released below (engine.runtime.reference says why)
    debug_sink = rt.HalModuleDebugSink(sink)
    hal = rt.create_hal_module(instance, hal_device, debug_sink=debug_sink)
    module = rt.VmModule.copy_buffer(instance, Path(vmfb).read_bytes())
    context = rt.VmContext(instance, [hal, module])
    arg_list = rt.VmVariantList(len(args))
    for a in args:
        if np.ndim(a) == 0 and np.asarray(a).dtype.kind == "i":  # an integer scalar argument
            arg_list.push_int(int(a))
            continue
        arg_list.push_ref(
            hal_device.allocator.allocate_buffer_copy(
                memory_type=rt.MemoryType.DEVICE_LOCAL,
                allowed_usage=rt.BufferUsage.DEFAULT,
                device=hal_device,
                buffer=np.require(a, requirements="C"),  # ascontiguousarray makes rank 0 rank 1
                element_type=_iree_element_type(rt, a.dtype),
            )
        )
    context.invoke(module.lookup_function(function), arg_list, rt.VmVariantList(4))
    # Every buffer before the device (IREE's buffers do not keep their device alive), the device last.
    del arg_list, context, hal, debug_sink, module, hal_device
    return seen


def _iree_element_type(rt, dtype):
    names = {
        "float32": "FLOAT_32",
        "float16": "FLOAT_16",
        "int32": "SINT_32",
        "int8": "SINT_8",
        "int64": "SINT_64",
        "bool": "BOOL_8",
    }
    return getattr(rt.HalElementType, names[np.dtype(dtype).name])


# -- programs run by several test modules ------------------------------------------------------------------

# (sample, function, inputs): covers f32/f16/i8/i32/i64 tensors, scalars, rank 0, splats, >1024 elements.
RUN_CASES = [
    ("matmul", "main", ["4x8xf32=" + " ".join(str(i / 10) for i in range(32)), "8x16xf32=0.3"]),
    ("multi_function", "scalar_math", ["1e-7", "-3"]),
    ("multi_function", "add", ["4xf32=1e-10 1e20 -0.0 inf", "4xf32=0 0 0 -1e-30"]),
    ("int_types", "i8_ops", ["16xi8=100 -1 2 3 4 5 6 7 8 9 10 11 12 13 14 127", "16xi8=100"]),
    ("int_types", "widen_sum", ["16xi8=1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 -16"]),
    ("f16", "fma_f16", ["8xf16=1.5 2 3 4 5 6 7 8", "8xf16=2", "8xf16=0.25"]),
    ("large_constant", "main", ["16384xf32=2.5"]),
    ("control_flow", "collatz_steps", ["27"]),
    (
        "dynamic",
        "matmul_rows",
        ["3x8xf32=[1 2 3 4 5 6 7 8][1 1 1 1 1 1 1 1][0 0 0 0 0 0 0 1]", "8x4xf32=0.5"],
    ),
]


# -- reading what IREE's tools print -----------------------------------------------------------------------


def grep(text: str, pattern: str) -> list[int]:
    """1-based numbers of the lines matching ``pattern`` (a regular expression), like ``grep -n``."""
    return [n for n, line in enumerate(text.splitlines(), 1) if re.search(pattern, line)]


def tool_call_sites(vmfb) -> list[tuple[int, int, str, str]]:
    """(function ordinal, pc, export, line text) of each dispatch call, read from iree-dump-module's text.

    A straight-line reading of the text: ``%rN = vm.const.ref.rodata K`` puts rodata K in rN, a
    ``hal.executable.lookup.function(%rX, %rY)`` result holds the export named by rY's rodata, and a
    ``hal.command_buffer.dispatch(cmd, executable, %iF, ...)`` dispatches what %iF holds.
    """
    text = subprocess.run(
        [iree_tool("iree-dump-module"), "--output=disassembly", "--bytecode_offsets", str(vmfb)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rodata = {
        int(k): bytes.fromhex(v)
        for k, v in re.findall(r"^vm\.rodata\[(\d+)\] = ([0-9A-F]*)$", text, re.MULTILINE)
    }
    sites = []
    function = -1
    regs: dict[str, object] = {}
    for line in text.splitlines():
        if line.startswith("vm.func "):
            function += 1
            regs = {}
            continue
        m = re.match(r"^\[([0-9A-F]{8})\]\s*(.*)$", line)
        if not m:
            continue
        pc, body = int(m[1], 16), m[2]
        if r := re.match(r"%r(\d+) = vm\.const\.ref\.rodata (\d+)", body):
            regs[f"r{r[1]}"] = rodata[int(r[2])]
        elif r := re.match(
            r"%i(\d+) = vm\.call @hal\.executable\.lookup\.function\(%[rR]\d+, %[rR](\d+)\)", body
        ):
            regs[f"i{r[1]}"] = regs.get(f"r{r[2]}", b"").decode()
        elif "@hal.command_buffer.dispatch" in body:
            args = re.search(r"\)?\((.*)\)$", body)[1].split(", ")
            sites.append((function, pc, regs.get("i" + args[2].lstrip("%i")), body))
        else:
            # Anything else that writes a register we track forgets it.
            if " = " in body:
                for bank, reg in re.findall(r"%([ri])(\d+)", body.split(" = ")[0]):
                    regs.pop(f"{bank}{reg}", None)
    return sites


def hal_dispatches(sample: str, tmp_path: Path) -> dict[str, tuple[int, int, int]]:
    """Entry point → static workgroup count, read from ``iree-compile --compile-to=hal`` (dynamic ones left out)."""
    out = tmp_path / f"{sample}.hal.mlir"
    # Where iree-compile is absent (a GPU box with only the runtime): the same output built elsewhere, in
    # LENS_TEST_PREBUILT (see tests/conftest.py) as SAMPLE.vulkan-spirv.hal.mlir.
    prebuilt = Path(os.environ.get("LENS_TEST_PREBUILT", "")) / f"{sample}.vulkan-spirv.hal.mlir"
    if os.environ.get("LENS_TEST_PREBUILT") and prebuilt.exists():
        out = prebuilt
    else:
        cmd = [str(sample_path(sample)), *TARGETS["vulkan-spirv"].flags, "--compile-to=hal"]
        iree_compile([*cmd, "-o", str(out)], check=True)
    found: dict[str, tuple[int, int, int]] = {}
    for block in out.read_text().split("util.func ")[1:]:
        consts = dict(re.findall(r"(%[\w-]+) = arith\.constant (-?\d+) : index", block))
        entries = re.findall(
            r"hal\.executable\.lookup\.function .*?function\(@[\w$.-]+::@[\w$.-]+::@([\w$.-]+)\)", block
        )
        counts = re.findall(r"hal\.command_buffer\.dispatch<.*?workgroups\(\[([^\]]*)\]\)", block)
        for entry, count in zip(entries, counts):
            names = [c.strip() for c in count.split(",")]
            if all(n in consts for n in names):
                found[entry] = tuple(int(consts[n]) for n in names)
    return found


# -- running on IREE's runtime and comparing ---------------------------------------------------------------


def run_reference(vmfb: Path, function: str, inputs: list[np.ndarray]) -> np.ndarray:
    """Run ``function`` with IREE's runtime on its vulkan driver (``ReferenceRunner``, which reads a
    device-local result through a staging buffer and gives its device back): its one result."""
    from engine.runtime.reference import ReferenceRunner

    (result,) = ReferenceRunner(vmfb, "vulkan").invoke(function, [Tensor.from_numpy(a) for a in inputs])
    return result.array


_ARGUMENT = re.compile(r"%\w+:\s*(tensor<[^>]*>|[a-z]+\d+)")


def argument_types(declaration: str) -> list[str]:
    """The argument types of an ``iree.abi.declaration`` (``sync func @f(%a: tensor<4xf32>, %n: i32) -> ...``)."""
    start = declaration.index("(") + 1
    end = declaration.index(") ->") if ") ->" in declaration else declaration.rindex(")")
    return _ARGUMENT.findall(declaration[start:end])


DYNAMIC_DIM = 6  # the size random_value gives a dynamic dimension
SCALAR_INT = 3  # the value random_value gives an integer scalar (small: some samples loop that many times)


def random_value(type_text: str, rng: np.random.Generator) -> Tensor | Scalar:
    if not type_text.startswith("tensor<"):
        element = et.parse_element_type(type_text)
        if element.is_float:
            return Scalar(
                "f32" if element.bit_count == 32 else "f64", float(np.float32(rng.standard_normal()))
            )
        return Scalar("i64" if element.bit_count == 64 else "i32", SCALAR_INT)
    *dims, element_text = type_text[len("tensor<") : -1].split("x")
    shape = tuple(DYNAMIC_DIM if d == "?" else int(d) for d in dims)
    element = et.parse_element_type(element_text)
    dtype = element.dtype
    if element.numerical_type == et.BOOLEAN:
        array = rng.integers(0, 2, shape).astype(dtype)
    elif element.is_float and dtype.kind == "f":
        array = rng.standard_normal(shape).astype(dtype)
    elif element.is_float:  # bf16 stored as raw bits: small finite values
        array = (rng.standard_normal(shape).astype(np.float32).view(np.uint32) >> 16).astype(dtype)
    else:
        info = np.iinfo(dtype)
        array = rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)
    return Tensor(np.ascontiguousarray(array), element)


def assert_same(got, expected, where: str) -> None:
    if isinstance(expected, Tensor):
        assert isinstance(got, Tensor), f"{where}: {got!r} is not a tensor"
        assert got.element_type == expected.element_type, where
        assert got.shape == expected.shape, where
        raw_got = np.ascontiguousarray(got.array).view(np.uint8)
        raw_expected = np.ascontiguousarray(expected.array).view(np.uint8)
        assert np.array_equal(raw_got, raw_expected), f"{where}: bytes differ"
    elif isinstance(expected, Scalar):
        assert isinstance(got, Scalar), where
        assert got.kind == expected.kind, where
        if expected.kind in ("f32", "f64"):
            assert np.float64(got.value).tobytes() == np.float64(expected.value).tobytes(), where
        else:
            assert int(got.value) == int(expected.value), where
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, f"{where}[{i}]")
    else:
        assert isinstance(got, OpaqueRef), where


# -- kernels that misbehave on purpose ---------------------------------------------------------------------

NULL_WRITE = bytes.fromhex("48c704250000000000000000")  # mov qword ptr [0], 0
SPIN = bytes.fromhex("ebfe")  # jmp . (a kernel that never returns)


def patched_kernel_copy(vmfb, out, code: bytes = NULL_WRITE, export: int = 0):
    """A copy of an llvm-cpu module whose first executable's dispatch function ``export`` (the first by
    default) starts with ``code``."""
    from elftools.elf.elffile import ELFFile

    from engine.runtime.hal.cpu_library import CpuExecutableLibrary

    shutil.copy(vmfb, out)
    module = open_vmfb(out)
    executable = module.executables[0]
    segment = module.rodata_segments[executable.rodata_ordinal]
    elf_bytes = bytes(executable.data)
    with CpuExecutableLibrary.load(elf_bytes) as lib:
        vaddr = lib.export_address(export) - lib.load_base
    elf = ELFFile(io.BytesIO(elf_bytes))
    text = next(s for s in elf.iter_segments() if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1)
    offset = segment.file_offset + vaddr - text["p_vaddr"] + text["p_offset"]
    module.close()
    with open(out, "r+b") as f:
        f.seek(offset)
        f.write(code)


# -- programs compiled with their executables dumped (substitution tests) ----------------------------------


# Target flags of the substitution tests, as a user writes them for iree-compile.
TARGET_FLAGS = {
    "cpu": ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
            "--iree-llvmcpu-target-cpu=host"],
    "vulkan": ["--iree-hal-target-device=vulkan"],
    "vmvx": ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=vmvx"],
}  # fmt: skip


# Shared with the benchmarks (benchmarks/ is on the tests' path): the edit the substitution tests make, and
# the target words of compile_with_dumps.
from bench_support import TARGET_NAMES, edited_source  # noqa: E402, F401


def compile_with_dumps(sample: str, target: str, out: Path) -> Path:
    """A bundled sample compiled for ``target`` (cpu, vulkan, vmvx) with its executables' sources,
    intermediates (.ll, .spirv) and binaries dumped under ``out``, as benchmarks/bench_support.py's
    function of the same name does, through the run's compile cache."""
    out.mkdir(parents=True, exist_ok=True)
    vmfb = out / f"{sample}.vmfb"
    if not vmfb.exists():
        dumps = [f"--iree-hal-dump-executable-{kind}-to={out / kind}" for kind in ("sources", "intermediates", "binaries")]
        flags = TARGETS[TARGET_NAMES[target]].flags
        iree_compile([str(sample_path(sample)), *flags, "-o", str(vmfb), *dumps], check=True)
    return vmfb


def assert_within_ulps(got, expected, ulps: int, magnitude=None) -> None:
    """``got`` equals ``expected`` to ``ulps`` units in the last place (for float results computed in
    another order or with fused multiply-adds, never bit for bit). The ulp is that of the larger of the
    two values, or of ``magnitude`` where given: the size of the operands, when a sum cancels (an FMA
    and a rounded product differ by half an ulp of the product, not of the small result)."""
    import numpy as np

    got = np.asarray(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype, expected.dtype)
    size = np.maximum(np.abs(got), np.abs(expected))
    if magnitude is not None:
        size = np.maximum(size, np.abs(np.asarray(magnitude)))
    scale = np.spacing(size.astype(got.dtype))
    err = np.abs(got.astype(np.float64) - expected.astype(np.float64)) / scale.astype(np.float64)
    worst = int(np.argmax(err)) if err.size else 0
    assert not err.size or err.flat[worst] <= ulps, (
        f"{err.flat[worst]:.1f} ulps apart at flat index {worst}: {got.flat[worst]!r} vs {expected.flat[worst]!r}"
    )


class LocalSshd:
    """A real ``sshd`` on a loopback port (127.0.0.1) with throwaway host and user keys, for tests of
    ``--remote='ssh ...'``. ``start()`` returns a reason string instead when sshd cannot run here (not
    installed, no privilege separation directory, refused to start), for ``pytest.skip``."""

    def __init__(self, root: Path):
        self.root = root
        self.process: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> str | None:
        import os
        import socket
        import time

        sshd = shutil.which("sshd") or next(
            (p for p in ("/usr/sbin/sshd", "/usr/bin/sshd") if Path(p).exists()), None
        )
        keygen = shutil.which("ssh-keygen")
        if not sshd or not keygen or not shutil.which("ssh"):
            return "OpenSSH (sshd, ssh, ssh-keygen) is not installed: apt-get install openssh-server openssh-client"
        self.root.mkdir(parents=True, exist_ok=True)
        for name in ("host_key", "user_key"):
            subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(self.root / name)], check=True)
        authorized = self.root / "authorized_keys"
        authorized.write_text((self.root / "user_key.pub").read_text())
        os.chmod(authorized, 0o600)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = self.root / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.root / 'host_key'}\n"
            f"AuthorizedKeysFile {authorized}\nPidFile {self.root / 'sshd.pid'}\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nLogLevel ERROR\n"
        )
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        check = subprocess.run([sshd, "-t", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            return f"sshd refuses this configuration: {check.stderr.strip()[-300:]}"
        self.process = subprocess.Popen([sshd, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"sshd exited at start: {self.process.stderr.read().decode(errors='replace')[-300:]}"
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.1)
                continue
            probe = subprocess.run([*self.ssh_argv(), "true"], capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                return None
            return f"ssh to the local sshd failed: {probe.stderr.strip()[-300:]}"
        return "sshd did not listen within 10 s"

    def ssh_argv(self) -> list[str]:
        """``ssh`` to the local sshd as the current user, with the throwaway key, trusting the host key."""
        import getpass

        return [
            "ssh",
            "-p",
            str(self.port),
            "-i",
            str(self.root / "user_key"),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
            f"{getpass.getuser()}@127.0.0.1",
        ]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()  # an unclosed pipe is a ResourceWarning when it is collected


# -- a program with weights IREE folds into its dispatches (dense_resource blobs), as PyTorch exports have


def _blob(values: np.ndarray) -> str:
    # A builtin dense_resource blob: 4-byte alignment, then the little-endian data.
    return "0x04000000" + values.astype("<f4").tobytes().hex().upper()


def tiny_program(path: Path) -> Path:
    """Two matmul + bias layers whose weights are ``dense_resource`` blobs (IREE folds the biases into the
    dispatches, as it does a PyTorch export's)."""
    rng = np.random.default_rng(0)
    w1, w2 = (rng.standard_normal((16, 16)).astype(np.float32) for _ in range(2))
    b1, b2 = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
    layer = """
    %m{i} = linalg.matmul ins(%x{i}, %w{i} : tensor<4x16xf32>, tensor<16x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
    %x{n} = linalg.generic {{indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}}
        ins(%m{i}, %b{i} : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %s = arith.addf %a, %b : f32
      %t = arith.maximumf %s, %zero : f32
      linalg.yield %t : f32
    }} -> tensor<4x16xf32>"""
    body = "".join(layer.format(i=i, n=i + 1) for i in (1, 2))
    path.write_text(f"""#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
module @tiny {{
  util.global private @w1 = dense_resource<tiny_w1> : tensor<16x16xf32>
  util.global private @w2 = dense_resource<tiny_w2> : tensor<16x16xf32>
  util.global private @b1 = dense_resource<tiny_b1> : tensor<16xf32>
  util.global private @b2 = dense_resource<tiny_b2> : tensor<16xf32>
  func.func @main(%x1: tensor<4x16xf32>) -> tensor<4x16xf32> {{
    %w1 = util.global.load @w1 : tensor<16x16xf32>
    %w2 = util.global.load @w2 : tensor<16x16xf32>
    %b1 = util.global.load @b1 : tensor<16xf32>
    %b2 = util.global.load @b2 : tensor<16xf32>
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<4x16xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>{body}
    return %x3 : tensor<4x16xf32>
  }}
}}

{{-#
  dialect_resources: {{
    builtin: {{
      tiny_w1: "{_blob(w1)}",
      tiny_w2: "{_blob(w2)}",
      tiny_b1: "{_blob(b1)}",
      tiny_b2: "{_blob(b2)}"
    }}
  }}
#-}}
""")
    return path


def cuda_driver_present() -> bool:
    """Whether ``libcuda.so.1`` loads and initialises here (tests that need a GPU skip when not)."""
    from engine.errors import CudaUnavailableError
    from engine.runtime.hal.cuda.driver import library

    try:
        library()
    except CudaUnavailableError:
        return False
    return True


def damage_at_random(data: bytes, read, error: type[Exception], times: int, seed: int = 34) -> None:
    """``read`` of ``times`` copies of ``data``, each with 1 to 7 bytes set at random (seeded): a reading or
    ``error``, never another exception (which fails the test)."""
    rng = np.random.default_rng(seed)
    for _ in range(times):
        damaged = bytearray(data)
        for at in rng.integers(0, len(damaged), rng.integers(1, 8)):
            damaged[at] = rng.integers(0, 256)
        try:
            read(bytes(damaged))
        except error:
            pass


# One dynamic-shape elementwise dispatch (push constants for the sizes) and one static matmul (a 2-D block): what
# the GPU builds' tests (CUDA, HIP) read both kinds of export from.
GPU_PROGRAM = """
func.func @main(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %0 = arith.addf %a, %b : tensor<?xf32>
  return %0 : tensor<?xf32>
}
func.func @mm(%a: tensor<16x32xf32>, %b: tensor<32x8xf32>) -> tensor<16x8xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %r = linalg.matmul ins(%a, %b : tensor<16x32xf32>, tensor<32x8xf32>) outs(%f : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %r : tensor<16x8xf32>
}
"""

def compile_for(source: Path, out: Path, target: str, *flags: str) -> Path:
    """``source`` compiled by iree-compile for ``target`` (IREE Lens's target names) to ``out``; ``cuda`` on a
    machine with a CUDA device is built for that device's architecture (sm_80 code does not load on an older
    GPU)."""
    from engine.compiler.targets import target_flags

    if target == "cuda" and cuda_driver_present():
        from engine.runtime.hal.devices import compile_target_for

        target = compile_target_for("cuda")

    proc = iree_compile([str(source), *target_flags(target), *flags, "-o", str(out)], timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def save_matmul_inputs(folder: Path, seed: int) -> None:
    """Random ``lhs.npy`` (4x8) and ``rhs.npy`` (8x16) in ``folder``: inputs of the bundled matmul sample."""
    rng = np.random.default_rng(seed)
    np.save(folder / "lhs.npy", rng.standard_normal((4, 8)).astype(np.float32))
    np.save(folder / "rhs.npy", rng.standard_normal((8, 16)).astype(np.float32))


VM_PROGRAMS = Path(__file__).resolve().parents[1] / "vm_programs"  # programs written in the VM dialect


def compile_vm_dialect(source: Path, out: Path) -> Path:
    """A VM-dialect ``source`` (``vm.module``) compiled to bytecode at ``out`` (no HAL, no executables)."""
    proc = iree_compile(["--compile-from=vm", "--output-format=vm-bytecode", str(source), "-o", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def broken_build(source: Path, tmp: Path, target: str, executable: str, old: str, new: str) -> Path:
    """``source`` for ``target`` with ``executable``'s dumped source edited (``old`` -> ``new``, once) and put
    back with IREE's own ``--iree-hal-substitute-executable-source``: one dispatch deliberately wrong."""
    dump = tmp / f"sources_{target}_{executable}"
    compile_for(source, tmp / f"dump_{target}.vmfb", target, f"--iree-hal-dump-executable-sources-to={dump}")
    [src] = [p for p in dump.glob("*.mlir") if p.stem.endswith(executable)]
    text = src.read_text()
    assert old in text, f"{old} not in {src.name}"
    edited = tmp / f"{executable}_{target}_edited.mlir"
    edited.write_text(text.replace(old, new, 1))
    return compile_for(source, tmp / f"broken_{target}_{executable}.vmfb", target,
                       f"--iree-hal-substitute-executable-source={executable}={edited}")  # fmt: skip


# -- the command line, two builds of one program that differ in one dispatch, IREE's profiler ---------------

# The shared real models (tests that use them skip, with this reason, where the folder is absent).
MODELS = Path(__file__).resolve().parents[2] / ".." / "shared" / "models"


def lens_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``iree-lens ARGS`` in its own process (the process boundary: exit status, stdout, stderr)."""
    return subprocess.run([sys.executable, "-m", "app.launcher", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def lens_in_process(*args: str) -> subprocess.CompletedProcess:
    """``iree-lens ARGS`` run by ``engine.cli.main`` in this process, for a test about what a command does
    (its JSON, its exit status): what ``lens_cli`` returns, without a new interpreter importing IREE for each
    call. Tests of the process boundary itself (no display, ``os._exit``, signals) use ``lens_cli``."""
    import contextlib

    from engine.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse's errors and --help
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return subprocess.CompletedProcess(["iree-lens", *map(str, args)], code, out.getvalue(), err.getvalue())


def lens_run_in_process(vmfb, function: str, inputs=(), engine: str = "debug", *extra: str):
    """``iree-lens run`` as ``lens_run`` builds it, run in this process (``lens_in_process``): for tests of
    what it prints, not of the process it runs in."""
    args = ["run", str(vmfb), f"--function={function}", f"--engine={engine}"]
    return lens_in_process(*args, *[f"--input={i}" for i in inputs], *extra)


def broken_pair(source: Path, tmp: Path, executable: str, old: str, new: str) -> tuple[Path, Path, Path]:
    """For llvm-cpu, A: the program (its executables' sources dumped); B: the same with ``executable``'s
    source edited (``old`` op -> ``new``) and substituted; and the dump folder."""
    tmp.mkdir(parents=True, exist_ok=True)
    dump = tmp / "sources"
    a = compile_for(source, tmp / "a.vmfb", "llvm-cpu", f"--iree-hal-dump-executable-sources-to={dump}")
    [src] = [p for p in dump.glob("*.mlir") if p.stem.endswith(executable)]
    text = src.read_text()
    assert old in text, f"{old} not in {src.name}"
    edited = tmp / f"{executable}.mlir"
    edited.write_text(text.replace(old, new, 1))
    b = compile_for(source, tmp / "b.vmfb", "llvm-cpu", f"--iree-hal-substitute-executable-source={executable}={edited}")
    return a, b, dump


def iree_dispatches(vmfb: Path, function: str, inputs: list[str], device: str, tmp: Path) -> list[tuple]:
    """(export, workgroup count) of each dispatch IREE's profiler records, read straight from its JSONL."""
    import json

    from engine.trace.ireeprof import profiling_mode_for

    prof = tmp / f"oracle-{device}.ireeprof"
    cmd = [iree_tool("iree-run-module"), f"--module={vmfb}", f"--device={device}", f"--function={function}"]
    cmd += [f"--input={i}" for i in inputs]
    cmd += [f"--device_profiling_mode={profiling_mode_for(device)}", f"--device_profiling_output={prof}"]
    subprocess.run(cmd, check=True, capture_output=True)
    out = subprocess.run(
        [iree_tool("iree-profile"), "export", "--format=ireeperf-jsonl", str(prof)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.strip()]
    device_rows = [r for r in rows if r["record_type"] == "dispatch_event"]
    host_rows = [r for r in rows if r["record_type"] == "host_execution_event" and r["op"] == "dispatch"]
    chosen = device_rows or host_rows
    chosen.sort(key=lambda r: (r["submission_id"], r["command_index"]))
    return [(r["key"], tuple(r["workgroup_count"])) for r in chosen]


# -- waiting on a condition, never on the clock --------------------------------------------------------------


def wait_until(condition, timeout: float, what: str, poll: float = 0.01) -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` when it has not within ``timeout`` s."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)


def _proc_stat(pid: int) -> tuple[int, float]:
    """(parent pid, user + system CPU seconds) of a process, from ``/proc/PID/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, *, descendants_only: bool = False) -> float:
    """The CPU time process ``pid`` and the processes it started have used: proof that a child is running
    something (a loop, a kernel that spins) where it sends no event while it does. A process that already
    ended counts no more (its time is gone with it), so compare readings of a process that lives on."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = _proc_stat(int(entry.name))
            except (OSError, IndexError, ValueError):  # it ended while we looked
                continue
    tree, frontier = set(), [pid]
    while frontier:
        p = frontier.pop()
        tree.add(p)
        frontier += [c for c, (parent, _) in stats.items() if parent == p and c not in tree]
    if descendants_only:
        tree.discard(pid)
    return sum(stats[p][1] for p in tree if p in stats)


def run_folder() -> Path:
    """The test run's own folder, which the parallel workers share (tests/conftest.py makes it)."""
    return Path(os.environ.get("LENS_TEST_RUN_DIR") or tempfile.gettempdir())


def once_per_run(done: Path, build) -> Path:
    """``build()`` called unless ``done`` exists, under a lock beside it: the first worker that needs it
    builds it, one that asks meanwhile waits for that build instead of repeating it. ``build`` makes ``done``
    last (or it is touched after ``build`` returns), so a build that failed half way is built again."""
    import fcntl

    done.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{done}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            build()
            done.touch()
    return done


def shared_model(name: str) -> Path:
    """The shared model ``NAME.mlir``: the plain file, or ``NAME.mlir.xz`` unpacked once per test run into
    the run's folder, at one path for every test, so that each (model, flags) compiles once
    (tests/support/compile_cache.py keys by the source's path). Skips the test where the model is absent."""
    import lzma

    import pytest

    plain, packed = MODELS / f"{name}.mlir", MODELS / f"{name}.mlir.xz"
    if plain.exists():
        return plain
    if not packed.exists():
        pytest.skip(f"{packed} is absent (the shared models are not on this machine)")
    out = run_folder() / "models" / f"{name}.mlir"

    def unpack() -> None:
        partial = out.with_suffix(".partial")
        with lzma.open(packed) as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst)
        partial.rename(out)

    return once_per_run(out, unpack)


SHARED_MODELS = MODELS  # the name some test modules import


@dataclass(frozen=True)
class ModelBuild:
    """A shared model built for llvm-cpu (the host CPU) with IREE's dumps of its executables. ``module`` is
    the test's own copy; ``sources`` (``--iree-hal-dump-executable-sources-to``) and ``intermediates`` (the
    ``.ll`` files) are the run's, read-only."""

    module: Path
    sources: Path
    intermediates: Path


def model_cpu_build(name: str, out: Path, *, sources_beside: bool = False) -> ModelBuild:
    """The shared model ``NAME`` built once per test run for llvm-cpu (the host CPU), its executables'
    sources and LLVM IR dumped, copied to ``out``; with ``sources_beside``, the sources are copied beside it
    too (a ``sources`` folder, which IREE Lens finds without being told). One compile of a whole model
    (EfficientViT-M0: about 25 s) serves every test that needs the plain build, its sources or its IR. The
    sources' dumped paths are written into the module's executables, so these are one module's bytes
    wherever it is copied, but not a build without the dumps' bytes."""
    build = run_folder() / "model-builds" / name

    def compile_it() -> None:
        shutil.rmtree(build, ignore_errors=True)
        build.mkdir(parents=True)
        compile_for(shared_model(name), build / "module.vmfb", "llvm-cpu",
                    f"--iree-hal-dump-executable-sources-to={build / 'sources'}",
                    f"--iree-hal-dump-executable-intermediates-to={build / 'intermediates'}")  # fmt: skip

    once_per_run(build.with_name(f"{name}.done"), compile_it)  # (the lock beside it, not in ``build``)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(build / "module.vmfb", out)
    if sources_beside:
        shutil.copytree(build / "sources", out.parent / "sources", dirs_exist_ok=True)
    return ModelBuild(out, build / "sources", build / "intermediates")


def model_lens_sources(name: str) -> tuple[Path, list[Path]]:
    """``iree-lens sources`` of the shared model ``NAME``, written once per test run into the run's folder:
    its module and its executables' sources (read-only: a test writes its edits elsewhere). The command
    dumps IREE's compile phases and its executables' LLVM IR and binaries, none of which IREE writes into
    the module, so this module has a plain host-CPU build's bytes (``test_lens_sources_module_is_a_plain_
    build`` proves it): a test that needs a plain build of a whole model copies it instead of compiling one
    (without its sources beside it, which IREE Lens would find)."""
    out = run_folder() / "lens-sources" / name
    listing = out.with_name(f"{name}.written")  # what the command printed: the files it wrote

    def write() -> None:
        shutil.rmtree(out, ignore_errors=True)
        proc = lens_cli("sources", shared_model(name), f"--out={out}", timeout=900)
        assert proc.returncode == 0, proc.stderr
        partial = listing.with_name(f"{listing.name}.partial")
        partial.write_text(proc.stdout)
        partial.rename(listing)

    once_per_run(listing, write)
    written = [Path(line) for line in listing.read_text().split()]
    return next(p for p in written if p.suffix == ".vmfb"), sorted(p for p in written if p.suffix == ".mlir")


def slowed_build(source: Path, tmp: Path, executable: str) -> Path:
    """``source`` for llvm-cpu with ``executable`` deliberately slowed and its results kept: its configured
    source (IREE's ``--iree-hal-dump-executable-configurations-to``) with every workgroup and vector tile
    cut to one element (the reduction tiles kept), put back with
    ``--iree-hal-substitute-executable-configuration``. Thousands of one-point workgroups, same arithmetic."""
    dump = tmp / f"configurations_{executable}"
    compile_for(source, tmp / "dump_configurations.vmfb", "llvm-cpu",
                f"--iree-hal-dump-executable-configurations-to={dump}")  # fmt: skip
    [configured] = [p for p in dump.glob("*.mlir") if p.stem.endswith(executable)]

    def ones(m: re.Match) -> str:
        sizes = [int(v) for v in m.group(2).split(",")]
        return f"{m.group(1)}[{', '.join('1' if v else '0' for v in sizes)}]"

    text, count = re.subn(
        r"((?:distribution|vector_common_parallel) = )\[([\d, ]+)\]", ones, configured.read_text()
    )
    assert count, f"no tile sizes in {configured.name}"
    edited = tmp / f"{executable}_slowed.mlir"
    edited.write_text(text)
    return compile_for(source, tmp / f"slowed_{executable}.vmfb", "llvm-cpu",
                       f"--iree-hal-substitute-executable-configuration={executable}={edited}")  # fmt: skip
