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
