"""Builds for several devices (``--iree-hal-target-device`` given more than once) select one runtime device
per device global as they load, in order: ``iree-lens run`` gives them one device each (``--device`` once per
device, as iree-run-module takes them, or by default the devices the module was compiled for) on both engines.
Given too few, or in the debugger (which follows one device's dispatches), the run says which devices the
module needs instead of IREE's "HAL device `device_b` not found" and a page of target attributes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from support import iree_compile, iree_run_module_stdout, lens_in_process
from support.session import PROGRAMS, compile_program

from engine.runtime.vmfb.declared_devices import DeclaredDevice, declared_devices
from engine.runtime.vmfb.module import open_vmfb

INPUT = "4xf32=10,11,12,13"
TWO_LOCAL = ("--iree-hal-target-device=device_a=local[0]", "--iree-hal-target-device=device_b=local[1]",
             "--iree-hal-local-target-device-backends=llvm-cpu")  # fmt: skip


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("multi") / "two_devices.vmfb"
    proc = iree_compile([str(PROGRAMS / "two_devices.mlir"), *TWO_LOCAL, "-o", str(out)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_the_devices_are_read_from_the_initializer(two_devices, tmp_path):
    assert declared_devices(open_vmfb(two_devices)) == [DeclaredDevice("device_a", ("local",), 0),
                                                        DeclaredDevice("device_b", ("local",), 1)]  # fmt: skip
    one = compile_program("chain12", "llvm-cpu", tmp_path)
    assert declared_devices(open_vmfb(one)) == [DeclaredDevice("__device_0", ("local",))]
    either = tmp_path / "either.vmfb"
    proc = iree_compile([str(PROGRAMS / "chain12.mlir"), "--iree-hal-target-device=vulkan,local",
                         "--iree-hal-local-target-device-backends=llvm-cpu", "-o", str(either)])  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (device,) = declared_devices(open_vmfb(either))
    assert device.kinds == ("vulkan", "local") and device.describe() == "__device_0: vulkan or local"


@pytest.mark.parametrize("engine", ["debug", "reference"])
@pytest.mark.parametrize("devices", [[], ["local-sync", "local-task"]])
def test_run_gives_each_device_its_own(two_devices, engine, devices):
    proc = lens_in_process("run", str(two_devices), f"--engine={engine}", *[f"--device={d}" for d in devices],
                           "--function=multi_device_mul", f"--input={INPUT}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = np.float32([10, 11, 12, 13]) * np.float32([0, 1, 2, 3]) * np.float32([4, 5, 6, 7])
    assert "4xf32=" + " ".join(f"{v:g}" for v in expected) in proc.stdout
    assert proc.stdout == iree_run_module_stdout(two_devices, "multi_device_mul", [INPUT], ["local-task", "local-task"])
    if not devices:  # chosen, not given: said
        assert "device_a: local[0] on local-sync, device_b: local[1] on local-sync" in proc.stderr


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_one_device_for_two_is_said_plainly(two_devices, engine):
    proc = lens_in_process("run", str(two_devices), f"--engine={engine}", "--device=local-sync",
                           "--function=multi_device_mul", f"--input={INPUT}")  # fmt: skip
    assert proc.returncode == 1
    assert "was compiled for 2 devices (device_a: local[0], device_b: local[1])" in proc.stderr
    assert "#hal.executable.target" not in proc.stderr  # not IREE's page of target attributes


def test_the_debugger_says_it_follows_one_device(two_devices, tmp_path):
    script = tmp_path / "commands.txt"
    script.write_text("break dispatch 0\ncontinue\n")
    proc = lens_in_process("debug", str(two_devices), "--function=multi_device_mul", f"--input={INPUT}",
                           f"--commands={script}")  # fmt: skip
    assert proc.returncode != 0
    assert "compiled for 2 devices" in proc.stderr and "follow one device's dispatches" in proc.stderr


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_a_device_of_another_kind_is_named(two_devices, engine):
    proc = lens_in_process("run", str(two_devices), f"--engine={engine}", "--device=local-sync", "--device=vulkan",
                           "--function=multi_device_mul", f"--input={INPUT}")  # fmt: skip
    assert proc.returncode == 1
    assert "--device=vulkan (device 2 of 2) cannot be two_devices.vmfb's device_b: local[1]" in proc.stderr
    assert "give --device=local-sync there" in proc.stderr
