"""``iree-lens sources``: compile a program and write an editable, self-contained source of every executable.

    iree-lens sources PROGRAM.mlir --out=DIR [--target=llvm-cpu|vmvx|vulkan-spirv] [IREE flags...]

Writes into DIR:

* ``<executable>.mlir`` for each ``hal.executable`` of the program (``main$async_dispatch_0.mlir``): the op as
  IREE's ``executable-sources`` phase holds it, with the attribute aliases and the ``dense_resource`` blobs
  (weights folded into the dispatch) it uses, so it compiles alone and unmodified rebuilds the same kernel;
* ``<library>.ll`` for each CPU library (``module_linked.ll``): IREE's optimized LLVM IR of the linked
  executable;
* ``<export>.spvasm`` for each Vulkan pipeline: its SPIR-V as text;
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

from engine.compiler import CompileRequest, compile_program
from engine.compiler.request import selects_target
from engine.compiler.targets import COMPILE_ONLY_TARGETS, TARGETS
from engine.errors import CompileCancelled, FormatError


def _own_options(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    default = (lambda v: v) if defaults else (lambda v: argparse.SUPPRESS)
    parser.add_argument("--out", "-o", type=Path, default=default(None), help="folder to write into")
    parser.add_argument(
        "--target",
        default=default(None),
        choices=[*TARGETS, *COMPILE_ONLY_TARGETS],
        help="IREE target backend (default llvm-cpu, unless IREE's own target flags choose it)",
    )
    parser.add_argument("--target-cpu", default=default(None), help="llvm-cpu target CPU (default host)")
    parser.add_argument("--timeout", type=float, default=default(None), help="stop the compile after this many seconds")


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "sources",
        help="write every executable's self-contained source (.mlir, .ll, .spvasm) for --substitute",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _own_options(parser, defaults=True)
    parser.add_argument("source", type=Path, help=".mlir or .mlirbc program")
    parser.add_argument("iree_flags", nargs=argparse.REMAINDER, help="IREE flags, passed verbatim")
    parser.set_defaults(func=run)


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
    own = argparse.ArgumentParser(add_help=False)
    _own_options(own, defaults=False)
    parsed, iree_flags = own.parse_known_args(args.iree_flags)
    for key, value in vars(parsed).items():
        setattr(args, key, value)
    if args.out is None:
        print("iree-lens sources: --out=DIR is required", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="iree-lens-sources-"))
    try:
        if args.target is not None and selects_target(iree_flags):
            raise ValueError("--target and IREE's own target flags both choose the target; give one of them")
        request = CompileRequest.from_file(
            args.source,
            target=args.target or "llvm-cpu",
            target_cpu=args.target_cpu,
            extra_flags=tuple(iree_flags),
            timing=False,
        )
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
