"""What ``capture``, ``debug`` and ``profile`` share: a program to run, given either as a module (with the
function to call and its inputs) or as IREE's HAL replay (``.ireereplay``, a whole recorded run that
``engine/cli/replay.py`` handles)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.errors import LensError

REPLAY_SUFFIX = ".ireereplay"


def add_program_arguments(p: argparse.ArgumentParser, module_help: str) -> None:
    """The module (or replay), ``--function`` and ``--input``."""
    p.add_argument("module", help=module_help)
    p.add_argument("--function", default="", help="exported function to call (required for a .vmfb)")
    p.add_argument("--input", action="append", default=[], help="an input, as iree-run-module takes it")
    add_parameters_argument(p)
    add_modules_argument(p)


def add_modules_argument(p: argparse.ArgumentParser) -> None:
    """``--module FILE``: a compiled module the program calls (``args.modules``)."""
    p.add_argument("--module", dest="modules", action="append", default=[], metavar="FILE.vmfb",
                   help="a compiled module the program calls (its functions declared as @NAME.function), "
                   "registered before it, as iree-run-module's --module; repeatable (default: the .vmfb files "
                   "beside the program whose modules it names)")  # fmt: skip


PARAMETERS_HELP = (
    "[SCOPE=]FILE: a parameter archive (.irpa, .gguf, .safetensors) a program compiled with external "
    "parameters loads its weights from, as iree-run-module takes it; repeatable"
)


def add_parameters_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--parameters", action="append", default=[], metavar="[SCOPE=]FILE", help=PARAMETERS_HELP)


def parameter_archives(args: argparse.Namespace):
    """The ``--parameters`` archives, opened (None when none was given)."""
    from engine.runtime.parameters import ParameterArchives

    given = getattr(args, "parameters", None) or []
    return ParameterArchives.open_given(given)


def is_replay(path: str | None) -> bool:
    """True for IREE's HAL replays, which ``engine/cli/replay.py`` runs instead of a module."""
    return bool(path) and str(path).endswith(REPLAY_SUFFIX)


def missing_function(command: str, args: argparse.Namespace) -> bool:
    """True, after saying so, when a module was given without ``--function`` and it exports several (the
    command exits with 2); a module's only function (``only_function``) is called without being named."""
    if args.function:
        return False
    try:
        args.function = only_function(args.module)
    except (LensError, OSError):
        args.function = None  # the run itself says what is wrong with the file
    if args.function:
        return False
    print(f"iree-lens {command}: --function is required for a module that exports several", file=sys.stderr)
    return True


def only_function(module: str) -> str | None:
    """The module's one exported function (its ``$async`` twin and ``__init`` aside), or ``main`` when it
    exports several and that is one of them; None otherwise."""
    from engine.runtime.vmfb.module import open_vmfb

    names = [e.name for e in open_vmfb(module).exports if not e.name.endswith("$async") and not e.name.startswith("__")]
    if len(names) == 1:
        return names[0]
    return "main" if "main" in names else None


DEVICE_HELP = "local-sync, local-task, vulkan, cuda or hip (default: the device the module was compiled for)"


def add_no_rebuild_argument(p: argparse.ArgumentParser) -> None:
    """``--no-rebuild``: type tensors only from given or found sources, never from a rebuild of the program
    (which takes minutes on a large model the first time)."""
    p.add_argument(
        "--no-rebuild",
        action="store_true",
        help="type tensors only from --sources or a sources folder beside the module; do not rebuild the program "
        "the module names to type them (kept once built, but minutes on a large model the first time): the "
        "other dispatches' tensors are their bindings' bytes",
    )


def add_device_argument(p: argparse.ArgumentParser, help: str = DEVICE_HELP) -> None:
    """``--device``; left out, the command runs on ``module_device`` (the kind the module's executables need)."""
    p.add_argument("--device", default=None, help=help)


# The device a module whose executables are all of one kind runs on by default (CPU builds: local-sync).
_DEVICE_OF_KIND = {"vulkan": "vulkan", "cuda": "cuda", "hip": "hip"}


def module_device(module: str, device: str | None = None, option: str = "--device") -> str:
    """The device to run ``module`` on: ``device`` when given, else the kind its executables need (``vulkan``
    for SPIR-V, ``cuda`` for PTX, ``hip`` for HSACO, else ``local-sync``). ``option``: the flag that gives
    it, named in the refusal.

    Raises ``LensError`` when ``device`` runs none of the module's executable formats: otherwise the module's
    initializer traps with IREE's "HAL device `__device_0` not found or unavailable" and the whole target
    attribute, which does not say which device to give instead."""
    from engine.runtime.hal.devices import device_kind, formats_kind
    from engine.runtime.hal.formats import foreign_cpu_problem
    from engine.runtime.vmfb.module import open_vmfb

    try:
        formats = sorted({getattr(e, "format", "") or "" for e in open_vmfb(module).executables})
    except (LensError, OSError, TypeError):
        return device or "local-sync"  # the run itself reports what is wrong with the file
    kind = formats_kind(formats)  # None: no executables, or formats of several kinds or unknown ones
    foreign = foreign_cpu_problem(formats) if kind is None else None
    if foreign is not None:
        raise LensError(f"{Path(module).name}: {foreign}")
    if device is None:
        if kind is None:
            # A build for several targets, Vulkan among them, runs on Vulkan; formats IREE Lens does not
            # know (embedded-elf-arm_64, say) are IREE's local devices' to run or refuse.
            return "vulkan" if any(f.startswith("vulkan") for f in formats) else "local-sync"
        return _DEVICE_OF_KIND.get(kind, "local-sync")
    if kind is not None and device_kind(device) not in (None, kind):
        needed = _DEVICE_OF_KIND.get(kind, "local-sync")
        raise LensError(
            f"{Path(module).name} holds {', '.join(formats)} executables, which {device} does not run: "
            f"give {option}={needed} (or leave {option} out)"
        )
    return device


def warn_partial_subgroups(command: str, module: str, device: str) -> None:
    """Say on stderr, before a run on a Vulkan device, which kernels of ``module`` reduce over part of their
    workgroup there (``spirv_hazards.partial_subgroup_warning``): a build for a GPU with larger subgroups."""
    from engine.dispatch.spirv_hazards import partial_subgroup_warning
    from engine.runtime.hal.devices import device_kind, vulkan_subgroup_size
    from engine.runtime.vmfb.module import open_vmfb

    if device_kind(device) != "vulkan":
        return
    size, name = vulkan_subgroup_size(device)
    try:
        warning = partial_subgroup_warning(open_vmfb(module), size, name or device)
    except (LensError, OSError):
        return  # the run itself says what is wrong with the file
    if warning:
        print(f"iree-lens {command}: warning: {warning}", file=sys.stderr)


def no_inputs_problem(module: str, function: str | None, inputs: list[str] | None) -> str | None:
    """What to say when ``function`` takes inputs and none was given (before IREE's tools run it and bury
    that in their own output); None when inputs were given or the module cannot say (the run says why)."""
    from engine.runtime.vmfb.module import open_vmfb

    if inputs or not function:
        return None
    try:
        export = next((e for e in open_vmfb(module).exports if e.name == function), None)
        count = len(export.signature.cconv.arguments) if export is not None else 0
    except (LensError, OSError, ValueError):
        return None
    if count == 0:
        return None
    return (f"{function} takes {count} input{'s' if count > 1 else ''} and none was given: pass "
            f"{'each' if count > 1 else 'it'} with --input (as iree-run-module takes {'them' if count > 1 else 'it'})")  # fmt: skip


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--calls=0`` is refused by the parser, named)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value
