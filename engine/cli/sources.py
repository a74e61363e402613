"""``iree-lens sources``: compile a program and write an editable, self-contained source of every executable.

    iree-lens sources PROGRAM.mlir --out=DIR [--target=llvm-cpu|vmvx|vulkan-spirv|cuda] [IREE flags...]

Writes into DIR:

* ``<executable>.mlir`` for each ``hal.executable`` of the program (``main$async_dispatch_0.mlir``): the op as
  IREE's ``executable-sources`` phase holds it, with the attribute aliases and the ``dense_resource`` blobs
  (weights folded into the dispatch) it uses, so it compiles alone and unmodified rebuilds the same kernel;
* ``<library>.ll`` for each CPU library (``module_linked.ll``): IREE's optimized LLVM IR of the linked
  executable;
* ``<export>.spvasm`` for each Vulkan pipeline: its SPIR-V as text;
* ``<executable>.ptx`` for each CUDA executable: the PTX of its linked kernels;
* ``<module>.vmfb``: the compiled module those files belong to;
* ``iree-compile-flags.txt``: the IREE flags they were compiled with, which ``--substitute`` builds them with.

Each file's stem is a NAME that ``iree-lens run MODULE.vmfb --substitute=NAME=FILE`` takes. Compile the
module you run with the same IREE flags, or give it this ``<module>.vmfb``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from engine.cli.compile_arguments import (
    add_compile_options,
    add_compile_parser,
    compile_request,
    compiled_module,
    take_own_options,
)
from engine.compiler import compile_program
from engine.errors import CompileCancelled, FormatError


def add_parser(subparsers) -> None:
    add_compile_parser(
        subparsers,
        "sources",
        "write every executable's self-contained source (.mlir, .ll, .spvasm, .ptx) for --substitute",
        __doc__,
        add_compile_options,
        run,
    )


def write_sources(compilation, out: Path) -> list[Path]:
    """Write the editable texts of ``compilation``'s executables and its ``.vmfb`` into ``out``."""
    from engine.substitute.documents import documents_from_dumps

    out.mkdir(parents=True, exist_ok=True)
    written = []
    # The IREE flags the sources were made with: building them again (``--substitute``) uses the same
    # code generation options (``sources_batch.FLAGS_FILE``).
    from engine.substitute.sources_batch import FLAGS_FILE

    flags = out / FLAGS_FILE
    flags.write_text("".join(f"{f}\n" for f in compilation.request.compiler_flags()))
    written.append(flags)
    for doc in documents_from_dumps(compilation.out_dir / "executables", compilation.module_name):
        path = out / f"{doc.name}{doc.suffix}"
        path.write_text(doc.original)
        written.append(path)
    if compilation.vmfb_path is not None:
        vmfb = out / compilation.vmfb_path.name
        shutil.copyfile(compilation.vmfb_path, vmfb)
        written.append(vmfb)
    return written


def run(args: argparse.Namespace) -> int:
    iree_flags = take_own_options(args, add_compile_options)
    if compiled_module(args.source):
        print(
            f"iree-lens sources: {args.source} is a compiled module; sources are written from the program it "
            "was compiled from: give that .mlir (or .mlirbc) and the IREE flags it was compiled with, e.g. "
            "iree-lens sources PROGRAM.mlir --out=DIR --target=llvm-cpu",
            file=sys.stderr,
        )
        return 2
    if args.out is None:
        print("iree-lens sources: --out=DIR is required", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="iree-lens-sources-"))
    try:
        request = compile_request(args, iree_flags, timing=False)
        compilation = compile_program(request, out_dir=work, timeout_s=args.timeout)
        if not compilation.ok:
            sys.stderr.write(compilation.stderr())
            return 1
        written = write_sources(compilation, args.out)
    except (ValueError, FileNotFoundError, CompileCancelled, FormatError) as e:
        print(f"iree-lens sources: {e}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for path in written:
        print(path)
    return 0
