"""The tests' compile cache (tests/support/compile_cache.py): one real compile per distinct (source bytes,
flags, folders, compiler), the same module and messages for every later call, a new compile when anything
in the key changes."""

from __future__ import annotations

import pytest
from support.compile_cache import cache_key, iree_compile

from engine.compiler.targets import target_flags

PROGRAM = """func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("LENS_TEST_COMPILE_CACHE", str(root))
    return root


def _entries(root):
    return sorted(p.name for p in root.iterdir() if p.is_dir())


def test_a_second_compile_is_the_first_ones_module(tmp_path, cache):
    src = tmp_path / "twice.mlir"
    src.write_text(PROGRAM)
    flags = [str(src), *target_flags("vmvx")]
    first = iree_compile([*flags, "-o", str(tmp_path / "a.vmfb")], check=True)
    [entry] = _entries(cache)
    stamp = (cache / entry / "meta.json").stat().st_mtime_ns
    second = iree_compile([*flags, "-o", str(tmp_path / "b.vmfb")], check=True)
    assert _entries(cache) == [entry]  # no second entry: the output file is not part of the key
    assert (cache / entry / "meta.json").stat().st_mtime_ns == stamp  # and the entry was not rewritten
    assert (tmp_path / "a.vmfb").read_bytes() == (tmp_path / "b.vmfb").read_bytes()
    assert (first.returncode, first.stderr) == (second.returncode, second.stderr) == (0, "")


def test_changed_source_bytes_or_flags_compile_again(tmp_path, cache):
    src = tmp_path / "twice.mlir"
    src.write_text(PROGRAM)
    out = tmp_path / "m.vmfb"
    iree_compile([str(src), *target_flags("vmvx"), "-o", str(out)], check=True)
    before = out.read_bytes()
    src.write_text(PROGRAM.replace("addf", "mulf"))
    iree_compile([str(src), *target_flags("vmvx"), "-o", str(out)], check=True)
    assert out.read_bytes() != before  # the edited program, not the cached one
    iree_compile([str(src), *target_flags("vmvx"), "--iree-vm-target-index-bits=32", "-o", str(out)], check=True)
    assert len(_entries(cache)) == 3


def test_a_failed_compile_is_cached_with_its_message(tmp_path, cache):
    src = tmp_path / "bad.mlir"
    src.write_text("func.func @f( {")
    first = iree_compile([str(src), *target_flags("vmvx"), "-o", str(tmp_path / "x.vmfb")])
    second = iree_compile([str(src), *target_flags("vmvx"), "-o", str(tmp_path / "y.vmfb")])
    assert first.returncode != 0 and "error" in first.stderr
    assert (second.returncode, second.stderr) == (first.returncode, first.stderr)
    assert not (tmp_path / "y.vmfb").exists()
    with pytest.raises(Exception, match="returned non-zero exit status"):
        iree_compile([str(src), *target_flags("vmvx"), "-o", str(tmp_path / "z.vmfb")], check=True)


def test_dump_folders_are_keyed_by_path_and_put_back(tmp_path, cache):
    # IREE writes a dump folder's path into the module (the executable's debug info names its source
    # file), so two folders are two modules; the same folder, emptied, is filled again from the cache.
    src = tmp_path / "twice.mlir"
    src.write_text(PROGRAM)
    dump = tmp_path / "sources"
    args = [str(src), *target_flags("llvm-cpu"), f"--iree-hal-dump-executable-sources-to={dump}"]
    iree_compile([*args, "-o", str(tmp_path / "m.vmfb")], check=True)
    files = {p.name: p.read_bytes() for p in dump.iterdir()}
    assert files and str(dump).encode() in (tmp_path / "m.vmfb").read_bytes()
    for p in dump.iterdir():
        p.unlink()
    iree_compile([*args, "-o", str(tmp_path / "again.vmfb")], check=True)
    assert {p.name: p.read_bytes() for p in dump.iterdir()} == files
    other = tmp_path / "elsewhere"
    key = cache_key(args, tmp_path)
    assert cache_key([*args[:-1], f"--iree-hal-dump-executable-sources-to={other}"], tmp_path) != key
