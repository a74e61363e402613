"""``iree-lens phases``: compile a program and write every phase snapshot, its executables, pass timing
and the ``.vmfb`` into a folder (the snapshots under the names ``--dump-compilation-phases-to`` gives them).

    iree-lens phases SOURCE.mlir --out=DIR [--target=llvm-cpu|vmvx|vulkan-spirv] [IREE flags...]

Flags the command does not know are passed to iree-compile verbatim. IREE's own target flags
(--iree-hal-target-device=..., --iree-hal-local-target-device-backends=..., --iree-hal-target-backends=...)
replace the default target, so the snapshots are those `iree-compile --dump-compilation-phases-to` writes
for the same flags. Snapshots are found by the module's name as IREE gives it (`module @name`, else the
file's stem).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from engine.cli.compile_arguments import (
    add_compile_options,
    add_compile_parser,
    compile_request,
    option_default,
    take_own_options,
)
from engine.compiler import compile_program
from engine.compiler.phases import find_snapshot_files
from engine.errors import CompileCancelled

_OWN_OUTPUTS = ("executables", "source", "timing.json", "stderr.txt")


def _own_options(parser: argparse.ArgumentParser, defaults: bool) -> None:
    add_compile_options(parser, defaults)
    parser.add_argument(
        "--force",
        action="store_true",
        default=option_default(False, defaults),
        help="replace earlier results in --out",
    )


def add_parser(subparsers) -> None:
    add_compile_parser(
        subparsers,
        "phases",
        "compile and write every phase snapshot, executable, timing.json and the .vmfb",
        __doc__,
        _own_options,
        run,
    )


def _clear_previous(out: Path, module: str, force: bool) -> None:
    previous = [s.path for s in find_snapshot_files(out) if s.module == module]
    previous += [out / name for name in _OWN_OUTPUTS if (out / name).exists()]
    previous += [out / name for name in (f"{module}.vmfb", f"{module}.out.mlir") if (out / name).exists()]
    if previous and not force:
        raise FileExistsError(f"{out} already holds compile results (use --force to replace them)")
    for path in previous:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def _take_phase_range(iree_flags: list[str]) -> tuple[list[str], dict[str, str]]:
    """IREE's ``--compile-from=PHASE`` / ``--compile-to=PHASE`` (``=`` or a separate word), taken out of
    the verbatim flags into the request's fields, which pass them on and know which snapshots to expect."""
    rest: list[str] = []
    phases: dict[str, str] = {}
    words = iter(iree_flags)
    for word in words:
        for flag, field in (("--compile-from", "compile_from"), ("--compile-to", "compile_to")):
            if word == flag:
                value = next(words, None)
                if value is None:
                    raise ValueError(f"{flag} needs a phase")
                phases[field] = value
                break
            if word.startswith(flag + "="):
                phases[field] = word.split("=", 1)[1]
                break
        else:
            rest.append(word)
    return rest, phases


def run(args: argparse.Namespace) -> int:
    iree_flags = take_own_options(args, _own_options)
    if args.out is None:
        print("iree-lens phases: --out=DIR is required", file=sys.stderr)
        return 2
    try:
        iree_flags, phase_range = _take_phase_range(iree_flags)
        request = compile_request(args, iree_flags, **phase_range)
        args.out.mkdir(parents=True, exist_ok=True)
        _clear_previous(args.out, request.module_name, args.force)
        compilation = compile_program(request, out_dir=args.out, timeout_s=args.timeout)
    except (ValueError, FileNotFoundError, FileExistsError, CompileCancelled) as e:
        print(f"iree-lens phases: {e}", file=sys.stderr)
        return 2
    if not compilation.ok:
        sys.stderr.write(compilation.stderr())
        for d in compilation.diagnostics:
            if d.message.startswith("iree-compile crashed"):
                print(d, file=sys.stderr)
        if compilation.failed_executables:
            print(f"failing executables: {', '.join(compilation.failed_executables)}", file=sys.stderr)
        return 1
    for snapshot in compilation.phases:
        print(snapshot.path)
    for executable in compilation.executables:
        files = [executable.source, executable.configuration, *executable.intermediates, *executable.binaries]
        print(f"executable {executable.name}: {len([f for f in files if f])} files")
    if compilation.timing is not None:
        print(f"{args.out / 'timing.json'} (total {compilation.timing.total_wall_s:.3f} s wall)")
    if request.compile_to not in (None, "end"):
        # iree-compile stopped early: its -o output is that phase's MLIR, not a module to load
        output = args.out / f"{request.module_name}.out.mlir"
        Path(str(compilation.vmfb_path)).replace(output)
        print(f"{output} (iree-compile's output: MLIR after phase {request.compile_to}, no .vmfb)")
        return 0
    print(compilation.vmfb_path)
    return 0
