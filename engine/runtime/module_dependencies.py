"""The bytecode modules a program is linked with: the ``.vmfb`` files its dependencies name.

A program may call functions of other compiled modules (``func.func private @module_a.abs`` declares one;
IREE's samples/multiple_modules): its ``dependencies`` table names them, and a VM context must register them
first, in an order where each module comes after those it depends on. iree-run-module takes them as
``--module=a.vmfb --module=b.vmfb --module=program.vmfb``; IREE Lens takes the same files (``--module``), and
without them looks beside the program for ``.vmfb`` files whose module has the name wanted (a module's name
is in the file, so a file found that way is the module the program names, not a guess from its file name).
The modules the engines provide themselves (``hal``, ``io_parameters``...) are not looked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.errors import LensError
from engine.runtime.vmfb.module import VmfbModule, open_vmfb

# Native modules the engines register themselves when a program imports them (IREE's hal and inline HAL,
# io_parameters, the e2e tests' check module, the VMVX module of a VMVX build's executables).
PROVIDED_MODULES = frozenset({"hal", "hal_inline", "hal_loader", "io_parameters", "check", "vmvx"})

# How many .vmfb files beside a program are opened to find a dependency by module name (a folder of build
# outputs, not a model zoo: the search stays bounded).
MAX_FILES_BESIDE = 200


class ModuleDependencyError(LensError):
    """A module the program depends on is not given and not found beside it."""


@dataclass(frozen=True)
class LinkedModule:
    """A bytecode module a program is linked with: its file, its module name, and whether it was given
    (``--module``) or found beside the program."""

    path: Path
    name: str
    found_beside: bool = False


def linked_modules(program: str | Path, given: list[str | Path] | tuple = ()) -> list[LinkedModule]:
    """The bytecode modules ``program`` needs registered before it, each after the modules it depends on:
    those ``given`` (in their order, as iree-run-module takes them) and those still missing, found beside the
    program by module name. ``ModuleDependencyError`` names a dependency found nowhere."""
    program = Path(program)
    given_by_name = {_open(p).name: Path(p) for p in given}
    beside: dict[str, Path] | None = None
    order: list[LinkedModule] = []
    placed: set[str] = set()

    def find(name: str, needed_by: str) -> Path:
        nonlocal beside
        if name in given_by_name:
            return given_by_name[name]
        if beside is None:
            skip = {program.resolve(), *(p.resolve() for p in given_by_name.values())}
            beside = _modules_beside(program, skip)
        if name not in beside:
            raise ModuleDependencyError(
                f"module @{needed_by} calls functions of module '{name}', which is not among the modules given "
                f"and not a .vmfb beside {program.name}: put its .vmfb beside the program, or give it with "
                "--module=FILE as iree-run-module takes it (a compiled module: native ones, such as a C++ custom "
                "module, are not loaded here)"
            )
        return beside[name]

    def place(name: str, path: Path) -> None:
        if name in placed:
            return  # (a cycle is IREE's to refuse as it links)
        placed.add(name)
        for dependency in called_modules(_open(path)):
            place(dependency, find(dependency, name))
        order.append(LinkedModule(path, name, found_beside=name not in given_by_name))

    for name, path in given_by_name.items():
        place(name, path)
    main = _open(program)
    for dependency in called_modules(main):
        place(dependency, find(dependency, main.name))
    return order


def called_modules(module: VmfbModule) -> list[str]:
    """The names of the compiled modules ``module`` needs registered before it (not the engines' own)."""
    return [d.name for d in module.dependencies if not d.optional and d.name not in PROVIDED_MODULES]


def _open(path: str | Path) -> VmfbModule:
    try:
        return open_vmfb(path)
    except (LensError, OSError) as e:
        raise ModuleDependencyError(f"cannot read module {path}: {e}") from None


def _modules_beside(program: Path, skip: set[Path]) -> dict[str, Path]:
    """Module name -> file, for the .vmfb files in the program's folder (the first file of each name, in
    name order)."""
    found: dict[str, Path] = {}
    for path in sorted(program.resolve().parent.glob("*.vmfb"))[:MAX_FILES_BESIDE]:
        if path.resolve() in skip:
            continue
        try:
            name = open_vmfb(path).name
        except (LensError, OSError):
            continue  # a damaged or foreign file beside the program is not what it needs
        found.setdefault(name, path)
    return found


def found_beside(runner) -> list[str]:
    """What a runner (either engine's) took from beside the program without being asked, one line each: the
    parameter archives holding the weights it loads, the compiled modules it calls, a static-library build's
    object."""
    lines = [f"parameters of scope {spec.scope!r} from {spec.path} (beside the program, holding every key it "
             "loads there; --parameters=SCOPE=FILE or File > Parameter Archive gives another)"
             for spec in runner.found_parameters]  # fmt: skip
    lines += [f"linked with @{m.name} from {m.path} (beside the program; --module=FILE gives another)"
              for m in runner.linked if m.found_beside]  # fmt: skip
    static = getattr(runner, "static_object", None)  # the debug engine's, for a static-library build
    if static is not None:
        lines.append(f"kernels of the static-library build loaded from {static} (the object it wrote)")
    return lines
