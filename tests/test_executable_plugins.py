"""A kernel that imports a function at run time (IREE's samples/custom_dispatch/cpu/plugin) runs once the
executable plugin that provides it is given (``--executable-plugin``, iree-run-module's ``--executable_plugin``),
in both engines, the debugger and the kernel stepper as in IREE's runtime; without it, the failure names the
function and the option. The plugin is built here from LLVM IR (``support.executable_plugin``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from support import compile_for, iree_run_module_stdout, lens_cli, lens_in_process
from support.executable_plugin import SYMBOL, build_plugin
from support.session import PROGRAMS

from engine.runtime.hal.executable_plugins import (
    PluginError,
    forget_registered_plugins,
    register_plugins,
    resolve_imports,
)

PROGRAM = PROGRAMS / "custom_dispatch" / "mul_plugin.mlir"
X = np.float32([1, -2, 3, 0.5, 8, -1, 2, 6])
Y = np.float32([4, 4, -1, 2, 0.25, 3, -2, 1])
INPUTS = ["8xf32=" + " ".join(f"{v:g}" for v in X), "8xf32=" + " ".join(f"{v:g}" for v in Y)]
WANT = "8xf32=" + " ".join(f"{v:g}" for v in X * Y + Y)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """The module and its plugin (``.sos``: IREE's runtime loads it with its embedded-ELF loader)."""
    out = tmp_path_factory.mktemp("plugin")
    return compile_for(PROGRAM, out / "mul_plugin.vmfb", "llvm-cpu"), build_plugin(out / "plugin.sos")


@pytest.fixture(autouse=True)
def no_plugins():
    """Plugins are the process's, as in IREE: each test starts and ends with none asked."""
    forget_registered_plugins()
    yield
    forget_registered_plugins()


def test_the_plugin_resolves_what_it_provides_and_no_more(built):
    import ctypes

    (plugin,) = register_plugins([built[1], built[1]])  # given twice: loaded once
    assert plugin.name == "lens_sample"
    symbols = [SYMBOL, "?optional_helper", "missing_one"]
    functions, contexts = (ctypes.c_void_p * 3)(), (ctypes.c_void_p * 3)()
    assert resolve_imports(symbols, functions, contexts) == ["missing_one"]  # the optional one may stay NULL
    assert functions[0] and contexts[0] and not functions[1] and not functions[2]


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_both_engines_print_what_iree_run_module_prints(built, engine):
    module, plugin = built
    proc = lens_in_process("run", str(module), f"--engine={engine}", f"--executable-plugin={plugin}",
                           "--function=mul_add", *[f"--input={i}" for i in INPUTS])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert WANT in proc.stdout
    flag = f"--executable_plugin={plugin}"  # IREE's spelling
    assert proc.stdout == iree_run_module_stdout(module, "mul_add", INPUTS, flags=[flag])


@pytest.mark.parametrize("engine", ["debug", "reference"])
def test_without_the_plugin_the_function_and_the_option_are_named(built, engine):
    # Its own process: IREE's runtime keeps a plugin once told of it.
    proc = lens_cli("run", built[0], f"--engine={engine}", "--function=mul_add", *[f"--input={i}" for i in INPUTS])
    assert proc.returncode == 1
    assert f"imports '{SYMBOL}', which it does not define" in proc.stderr and "--executable-plugin" in proc.stderr


def test_a_file_that_is_no_plugin_is_refused_plainly(built, tmp_path):
    for given, said in ((tmp_path / "absent.so", "does not exist"), (built[0], "cannot be loaded")):
        with pytest.raises(PluginError, match=said):
            register_plugins([given])
        proc = lens_in_process("run", str(built[0]), f"--executable-plugin={given}", "--function=mul_add")
        assert proc.returncode == 1 and said in proc.stderr


def test_the_debugger_stops_at_the_dispatch_and_the_stepper_says_what_it_did_not_record(built, tmp_path):
    module, plugin = built
    commands = tmp_path / "commands.txt"
    commands.write_text(f"break dispatch 0\ncontinue\nsave-tensors {tmp_path / 'stop'}\ncontinue\n")
    proc = lens_in_process("debug", str(module), f"--executable-plugin={plugin}", "--function=mul_add",
                           *[f"--input={i}" for i in INPUTS], f"--commands={commands}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "before dispatch #0 simple_mul" in proc.stdout and WANT in proc.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "stop" / "dispatch0_before_input0.npy"), X)
    proc = lens_in_process("kernel", str(module), f"--executable-plugin={plugin}", "--function=mul_add",
                           *[f"--input={i}" for i in INPUTS], "--dispatch=0", "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"imports {SYMBOL} from executable plugins (lens_sample (plugin.sos))" in proc.stderr
    steps = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert any("llvm.call" in json.dumps(step) for step in steps)  # the call into the plugin, as a statement



def test_inspect_lists_the_functions_an_executable_imports(built):
    proc = lens_in_process("inspect", str(built[0]), "--output=executables")
    assert proc.returncode == 0, proc.stderr
    assert f"imports (from executable plugins, --executable-plugin): {SYMBOL}" in proc.stdout
