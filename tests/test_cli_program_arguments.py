"""The arguments ``capture``, ``debug`` and ``profile`` share (``engine/cli/program_arguments.py``): a module
needs ``--function``; a commands file that cannot be read or parsed is refused before anything runs."""

from __future__ import annotations

import pytest

from engine.cli import main
from engine.cli.program_arguments import is_replay


@pytest.mark.parametrize(
    "argv",
    [
        ["capture", "m.vmfb", "--out", "bundle"],
        ["profile", "m.vmfb", "--out", "t.json"],
        ["debug", "m.vmfb", "--commands", "c.txt"],
    ],
)
def test_a_module_without_function_is_refused_with_status_2(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"iree-lens {argv[0]}: ") and "--function" in err
    assert not (tmp_path / "bundle").exists() and not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("module", ["m.vmfb", "run.ireereplay"])
def test_a_commands_file_that_cannot_be_read_or_parsed_is_refused_with_status_2(module, tmp_path, capsys):
    missing = tmp_path / "missing.txt"
    bad = tmp_path / "bad.txt"
    bad.write_text("frobnicate\n")
    extra = [] if is_replay(module) else ["--function", "main"]
    for commands in (missing, bad):
        assert main(["debug", str(tmp_path / module), *extra, "--commands", str(commands)]) == 2
        assert capsys.readouterr().err.startswith("iree-lens debug: ")


def test_is_replay():
    assert is_replay("a/b.ireereplay") and not is_replay("a.vmfb") and not is_replay(None) and not is_replay("")


ONE = "func.func @double(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = arith.addf %x, %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n"
TWO = ONE + ONE.replace("@double", "@twice")


def test_a_module_of_one_function_is_run_without_naming_it(tmp_path, capsys):
    """As iree-run-module does not: the module's only function (its $async twin aside) is called; a module
    of several, none of them main, still needs --function, said in one sentence."""
    from support import compile_for

    for name, text in (("one", ONE), ("two", TWO)):
        (tmp_path / f"{name}.mlir").write_text(text)
    one = compile_for(tmp_path / "one.mlir", tmp_path / "one.vmfb", "llvm-cpu")
    two = compile_for(tmp_path / "two.mlir", tmp_path / "two.vmfb", "llvm-cpu")
    assert main(["run", str(one), "--input=4xf32=1 2 3 4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("EXEC @double") and "4xf32=2 4 6 8" in out
    commands = tmp_path / "c.txt"
    commands.write_text("continue\n")
    assert main(["debug", str(one), "--input=4xf32=1 2 3 4", f"--commands={commands}"]) == 0
    assert "4xf32=2 4 6 8" in capsys.readouterr().out
    assert main(["run", str(two), "--input=4xf32=1 2 3 4"]) == 1
    assert "--function" in capsys.readouterr().err
    assert main(["profile", str(two), "--input=4xf32=1", f"--out={tmp_path / 't.json'}"]) == 2
    assert "exports several" in capsys.readouterr().err


def test_a_reader_that_stops_reading_is_not_an_error(tmp_path):
    """``iree-lens inspect M --output=disassembly | head -2``: the command ends quietly, status 0, as a
    pipeline's writer should, not with "[Errno 32] Broken pipe"."""
    import subprocess
    import sys

    from support import compile_for

    # More disassembly than a pipe holds (64 KiB), so the writer is still writing when the reader goes.
    many = "".join(ONE.replace("@double", f"@double{k}") for k in range(100))
    (tmp_path / "many.mlir").write_text(many)
    module = compile_for(tmp_path / "many.mlir", tmp_path / "many.vmfb", "llvm-cpu")
    lens = subprocess.Popen([sys.executable, "-m", "app.launcher", "inspect", str(module), "--output=disassembly"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert lens.stdout.readline().startswith(b"vm.module")
    lens.stdout.close()  # the reader is gone before the rest is written
    _, err = lens.communicate(timeout=120)
    assert lens.returncode == 0 and b"Broken pipe" not in err, err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["diverge", "a.vmfb", "--device-a=local-task", "b.vmfb", "--input=4xf32=1"],
         {"modules": ["a.vmfb", "b.vmfb"], "device_a": "local-task", "input": ["4xf32=1"]}),
        (["diverge", "--json", "a.vmfb", "--function", "f", "b.vmfb", "--atol=0"],
         {"modules": ["a.vmfb", "b.vmfb"], "json": True, "function": "f", "atol": 0.0}),
        (["compare-builds", "a.vmfb", "--function=f", "b.vmfb", "--repeat=2", "--json"],
         {"modules": ["a.vmfb", "b.vmfb"], "function": "f", "repeat": 2, "json": True}),
        (["run", "--input=4xf32=1", "m.vmfb", "--function=f"], {"module": "m.vmfb", "input": ["4xf32=1"]}),
        (["debug", "--commands=c.txt", "m.vmfb", "--json"], {"module": "m.vmfb", "commands": "c.txt", "json": True}),
        (["inspect", "--output=json", "m.vmfb"], {"module": "m.vmfb", "output": "json"}),
        (["zones", "--top=3", "t.json", "--json"], {"file": "t.json", "top": 3, "json": True}),
    ],
)
def test_options_stand_anywhere_among_a_commands_positional_arguments(argv, expected):
    """argparse's subparsers end a command's positionals at its first option: ``diverge a.vmfb --device-a=X
    b.vmfb`` was refused ("unrecognized arguments: b.vmfb"). Each command's line is read intermixed."""
    from engine.cli import build_parsers, parse_command_line

    parser, commands = build_parsers()
    args, unknown = parse_command_line(parser, commands, argv)
    assert unknown == [] and args.command == argv[0]
    assert {key: getattr(args, key) for key in expected} == expected


def test_iree_flags_still_stand_anywhere_for_the_commands_that_pass_them():
    """sources/phases/split/reduce keep their REMAINDER of IREE flags (which parse_intermixed_args refuses):
    parsed as before, the flags before the program among the words left over, those after it kept."""
    from engine.cli import build_parsers, parse_command_line

    parser, commands = build_parsers()
    argv = ["phases", "--iree-opt-level=O2", "--out=d", "p.mlir", "--iree-flag-b", "--target=vmvx"]
    args, unknown = parse_command_line(parser, commands, argv)
    assert unknown == ["--iree-opt-level=O2"] and str(args.source) == "p.mlir" and str(args.out) == "d"
    assert args.iree_flags == ["--iree-flag-b", "--target=vmvx"]  # take_own_options picks --target out
