"""What the window keeps in the temporary folder: an .mlir it opens is compiled into a folder named by the
source, the flags and the compiler, read back (not compiled again, not copied again) when the same source is
opened again by this process or another; a folder a compile did not finish is compiled again; what is a week
unused is pruned."""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import pytest

import app.module_loader as module_loader
from engine.compiler import CompileRequest, load_compilation
from engine.samples import sample_path
from engine.temp_caches import STALE_AFTER_S, prune_stale


@pytest.fixture
def temp_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(module_loader, "_CACHE", {})  # as a new process finds it
    return tmp_path / "tmp"


def test_an_mlir_opened_again_is_read_back_not_compiled_again(temp_dir, tmp_path):
    source = tmp_path / "mlp.mlir"
    shutil.copy(sample_path("mlp"), source)
    first = module_loader.compile_source(source)
    root = temp_dir / "iree-lens-compiled"
    assert first.out_dir.parent == root
    folders = sorted(p.name for p in root.iterdir())

    module_loader._CACHE.clear()  # another process, or this one later
    started = time.monotonic()
    again = module_loader.compile_source(source)
    read_back_s = time.monotonic() - started
    assert again is not first and again.out_dir == first.out_dir
    assert sorted(p.name for p in root.iterdir()) == folders  # nothing new in the temporary folder
    assert again.vmfb_bytes() == first.vmfb_bytes() and again.command == first.command
    assert [p.phase for p in again.phases] == [p.phase for p in first.phases]
    assert [p.text() for p in again.phases] == [p.text() for p in first.phases]
    assert [e.name for e in again.executables] == [e.name for e in first.executables]
    assert again.timing is not None and len(again.timing.passes) == len(first.timing.passes)
    assert read_back_s < first.elapsed_s  # no iree-compile: reading files back

    # Another target, or the same text in another file (its debug locations name that file): a build of its own.
    other = module_loader.compile_source(source, target="vmvx")
    assert other.out_dir != first.out_dir
    copy = tmp_path / "elsewhere" / "mlp.mlir"
    copy.parent.mkdir()
    shutil.copy(source, copy)
    assert module_loader.compile_source(copy).out_dir != first.out_dir

    # A compile that did not finish (no record written last) is compiled again, whole.
    (first.out_dir / "compilation.json").unlink()
    module_loader._CACHE.clear()
    assert load_compilation(CompileRequest.from_file(source, target="llvm-cpu"), first.out_dir) is None
    rebuilt = module_loader.compile_source(source)
    assert rebuilt.out_dir == first.out_dir and rebuilt.vmfb_bytes() == first.vmfb_bytes()
    assert (first.out_dir / "compilation.json").exists()

    # A record of other flags is not this request's build.
    request = CompileRequest.from_file(source, target="llvm-cpu", extra_flags=("--iree-opt-const-eval=false",))
    assert load_compilation(request, first.out_dir) is None


def test_what_is_a_week_unused_is_pruned(tmp_path):
    now = time.time()
    old, used, fresh = (tmp_path / name for name in ("old", "used", "fresh"))
    for folder in (old, used, fresh):
        folder.mkdir()
        (folder / "module.vmfb").write_bytes(b"x")
    lock = tmp_path / "old.lock"
    lock.write_bytes(b"")
    for path in (old, lock, used):
        os.utime(path, (now - STALE_AFTER_S - 60, now - STALE_AFTER_S - 60))
    os.utime(used, (now - 60, now - 60))  # used a minute ago, made long before
    assert sorted(p.name for p in prune_stale(tmp_path, now=now)) == ["old", "old.lock"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "used"]
    assert prune_stale(tmp_path / "absent") == []
