"""``iree-lens run``: call one function of a module, like ``iree-run-module``, on either engine."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.cli.program_arguments import (
    DEVICE_HELP,
    add_modules_argument,
    add_parameters_argument,
    is_replay,
    module_device,
    parameter_archives,
    warn_partial_subgroups,
)
from engine.dispatch.golden import add_golden_arguments, apply_golden, check_golden
from engine.errors import LensError
from engine.runtime.check import CheckRecorder, imports_check_module, reference_check_module
from engine.runtime.function_io import format_results, parse_inputs, split_cconv, write_outputs
from engine.runtime.module_dependencies import found_beside


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a function of a .vmfb (like iree-run-module)")
    p.add_argument("module", nargs="?", help="the .vmfb to run (default: the --golden bundle's)")
    p.add_argument("--function", help="exported function to call")
    add_golden_arguments(p)
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    add_parameters_argument(p)
    p.add_argument("--output", action="append", default=[], help="where each result goes: -, @f.npy, +f.npy")
    p.add_argument("--device", action="append", default=None,
                   help=DEVICE_HELP + "; once per device for a build for several (--iree-hal-target-device given "
                   "more than once), in the order it selects them, as iree-run-module takes them (default: the "
                   "devices it was compiled for)")  # fmt: skip
    add_modules_argument(p)
    p.add_argument(
        "--engine",
        choices=("debug", "reference"),
        default="debug",
        help="debug: IREE Lens's stepping VM and emulated HAL; reference: IREE's runtime",
    )
    p.add_argument("--trace", action="store_true", help="(debug engine) print every executed instruction")
    p.add_argument(
        "--substitute",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="run an edited executable: NAME is an executable or export (main_dispatch_0), FILE its MLIR "
        "source (.mlir), LLVM IR (.ll, CPU), SPIR-V (.spv/.spvasm, Vulkan) or PTX (.ptx, CUDA); repeatable",
    )
    p.add_argument(
        "--sources",
        action="append",
        default=[],
        help="(an .ireereplay) executable sources that type what the host read back, for --output: a "
        "--iree-hal-dump-executable-sources-to folder or .mlir files; default: sources beside the replay",
    )
    p.add_argument(
        "--write-replay",
        metavar="OUT.ireereplay",
        help="also write the debug run as an IREE HAL replay that iree-run-replay takes (for an .ireereplay: "
        "as it ran, substitutions applied)",
    )
    p.set_defaults(func=run)


def _runner(args, checks: CheckRecorder | None):
    """The engine's runner; with ``checks``, the ``check`` module (IREE's e2e expectations) is linked in."""
    replacements = _replacements(args)
    more_devices = _more_devices(args)
    args.device = module_device(args.module, args.device)
    if more_devices:
        from engine.runtime.vmfb.declared_devices import mismatched_device
        from engine.runtime.vmfb.module import open_vmfb

        problem = mismatched_device(open_vmfb(args.module), Path(args.module).name, [args.device, *more_devices])
        if problem is not None:
            raise LensError(problem)
    warn_partial_subgroups("run", args.module, args.device)
    parameters = parameter_archives(args)
    if args.engine == "reference":
        from engine.runtime.reference import ReferenceRunner

        extra = [reference_check_module(checks)] if checks is not None else []
        module_path = args.module
        if replacements:
            from engine.runtime.vmfb.module import open_vmfb
            from engine.substitute.apply import write_patched_module

            patched = write_patched_module(open_vmfb(args.module), replacements)
            try:
                # IREE's runtime copies the module into memory: the temporary file can go at once.
                return ReferenceRunner(str(patched), args.device, extra_modules=extra, parameters=parameters,
                                       more_device_uris=more_devices, modules=args.modules)  # fmt: skip
            finally:
                patched.unlink(missing_ok=True)
        return ReferenceRunner(module_path, args.device, extra_modules=extra, parameters=parameters,
                               more_device_uris=more_devices, modules=args.modules)  # fmt: skip
    from engine.runtime.debug_runner import INITIALIZER, DebugRunner

    trace = (lambda line: print(line)) if args.trace else None
    hal_module = None
    if replacements:
        from engine.runtime.debug_runner import create_device
        from engine.runtime.hal.module import HalModule
        from engine.substitute.apply import install_on_device

        device = create_device(args.device)
        if not args.device.startswith("local"):
            from engine.runtime.vmfb.module import open_vmfb
            from engine.substitute.apply import refuse_workgroup_count_changes

            refuse_workgroup_count_changes(open_vmfb(args.module), replacements, f"the {args.device} device")
        install_on_device(device, replacements)
        hal_module = HalModule(device)
    if more_devices:  # a multi-device build: the emulated HAL's devices, one per device the module selects
        from engine.runtime.debug_runner import create_device
        from engine.runtime.hal.module import HalModule

        if getattr(args, "write_replay", None):
            raise LensError("a replay records one device's queue: --write-replay runs a single-device build only")
        first = hal_module.devices[0] if hal_module is not None else create_device(args.device)
        others = [create_device(uri) for uri in more_devices]
        if replacements:
            for device in others:
                install_on_device(device, replacements)
        hal_module = HalModule([first, *others])
    if getattr(args, "write_replay", None):  # the debug run as an IREE HAL replay: engine/replay/record_run.py
        from engine.replay.record_run import start_recording
        from engine.runtime.debug_runner import create_device
        from engine.runtime.hal.module import HalModule

        if hal_module is None:
            hal_module = HalModule(create_device(args.device))
        args.replay_recorder = start_recording(hal_module.devices[0], args.write_replay)
    extra_modules = []
    if checks is not None:
        from engine.runtime.check.debug_module import CheckModule

        extra_modules.append(CheckModule(checks))
    runner = DebugRunner(args.module, args.device, trace=trace, extra_modules=extra_modules, hal_module=hal_module,
                         parameters=parameters, run_init=args.function != INITIALIZER, modules=args.modules)
    if getattr(args, "replay_recorder", None) is not None:  # the results' read-back is in the replay too
        runner.result_listeners.append(args.replay_recorder.read_results)
    return runner


def _more_devices(args) -> list[str]:
    """The devices after the first of a run: those ``--device`` gave after its first, else, when no device was
    given, those a multi-device build selects after its first (``args.device`` set to its first)."""
    if args.more_devices or args.device is not None:
        return list(args.more_devices)
    from engine.runtime.vmfb.declared_devices import declared_devices
    from engine.runtime.vmfb.module import open_vmfb

    try:
        declared = declared_devices(open_vmfb(args.module))
    except LensError:
        return []  # the run itself says what is wrong with the file
    if len(declared) < 2:
        return []
    args.device = declared[0].device_uri
    chosen = ", ".join(f"{d.describe()} on {d.device_uri}" for d in declared)
    print(f"iree-lens run: a build for {len(declared)} devices, each given its own: {chosen} (--device once per "
          "device chooses others)", file=sys.stderr)  # fmt: skip
    return [d.device_uri for d in declared[1:]]


def _replacements(args) -> list:
    """The built ``--substitute`` replacements (each compiled and checked against the module's interface)."""
    if not getattr(args, "substitute", None):
        return []
    from engine.runtime.vmfb.module import open_vmfb
    from engine.substitute.apply import build_all
    from engine.substitute.build import SubstitutionSpec

    specs = [SubstitutionSpec.parse(text) for text in args.substitute]
    return build_all(open_vmfb(args.module), specs)


def run(args: argparse.Namespace) -> int:
    devices = args.device or []
    args.device, args.more_devices = (devices[0] if devices else None), devices[1:]
    if is_replay(args.module):
        from engine.cli.replay import run as run_replay

        if args.more_devices:
            print("iree-lens run: a replay is one device's queue: give one --device", file=sys.stderr)
            return 2

        return run_replay(args)
    if getattr(args, "write_replay", None) and args.engine == "reference":
        print("iree-lens run: IREE's runtime writes its own replays: iree-run-module --device_replay_output=", file=sys.stderr)
        return 2
    for spec in args.output or []:  # said before the run, not as a traceback after it
        if spec[:1] in ("@", "+") and not Path(spec[1:]).resolve().parent.is_dir():
            print(f"iree-lens run: no folder {Path(spec[1:]).resolve().parent} to write --output={spec} in",
                  file=sys.stderr)  # fmt: skip
            return 1
    checks = None
    try:
        # The check imports are optional: without the module a program would skip its expectations silently.
        apply_golden(args)
        checks = CheckRecorder() if imports_check_module(args.module) else None
        runner = _runner(args, checks)
        for line in found_beside(runner):  # not asked for: said, so that a stale file beside is no surprise
            print(f"iree-lens run: {line}", file=sys.stderr)
        arg_kinds, _ = split_cconv(runner.cconv(args.function))
        inputs = parse_inputs(args.input, arg_kinds)
        print(f"EXEC @{args.function}", flush=True)
        if checks is not None:
            checks.begin(args.function)
        results = runner.invoke(args.function, inputs)
        if getattr(args, "replay_recorder", None) is not None:
            print(f"wrote {args.replay_recorder.close()} (iree-run-replay --device={args.device} ...)", file=sys.stderr)
        if args.output:
            try:
                notes: list[str] = []
                sys.stdout.write(write_outputs(args.output, results, notes))
                for note in notes:
                    print(f"iree-lens run: {note}", file=sys.stderr)
            except OSError as e:  # a full disk, a file not writable: one line, as IREE's tool says it
                raise LensError(f"cannot write the results: {e}") from None
        else:
            sys.stdout.write(format_results(results))
        return max(_report_checks(checks), check_golden(args, results))
    except LensError as e:
        _report_checks(checks)  # expectations that failed before the error are still news
        if getattr(args, "replay_recorder", None) is not None:
            args.replay_recorder.discard()  # a header and half a run: IREE's tools would take it as a replay
        print(f"iree-lens run: {e}", file=sys.stderr)
        return 1


def _report_checks(checks: CheckRecorder | None) -> int:
    """Print failed expectations (what was expected, what was found) to stderr; 1 if any failed."""
    if checks is None or not checks.failures:
        return 0
    sys.stdout.flush()
    sys.stderr.write(checks.report())
    print(f"iree-lens run: {len(checks.failures)} expectation(s) failed", file=sys.stderr)
    return 1
