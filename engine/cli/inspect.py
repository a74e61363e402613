"""``iree-lens inspect MODULE.vmfb``: a module's metadata, disassembly or everything as JSON.

``--output=metadata`` and ``--output=disassembly`` print what ``iree-dump-module`` prints;
``--output=json`` prints the whole parsed module (executables and their details included, and the
debug database's locations as text in table order); ``--locations`` adds each instruction's source
location to the disassembly (``  loc("model.mlir":3:5)`` after it).
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.cli.program_arguments import is_replay
from engine.errors import FormatError
from engine.runtime.hal.formats import is_cpu_elf
from engine.session.protocol import INITIALIZER


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("inspect", help="show a .vmfb module's metadata, disassembly or JSON")
    p.add_argument("module", help="the .vmfb file (or an .ireereplay)")
    p.add_argument(
        "--output",
        choices=("metadata", "disassembly", "json", "executables", "parameters", "globals"),
        default="metadata",
        help="what to print (default: metadata); globals: each global, by the name the VM phase snapshot "
        "beside the module gives it, with the functions that load and store it",
    )
    p.add_argument("--bytecode_offsets", "--bytecode-offsets", action="store_true", help="prefix pcs")
    p.add_argument("--function", default="", help="disassemble only this function (name or ordinal)")
    p.add_argument("--no-rodata", action="store_true", help="leave rodata hex out of the disassembly")
    p.add_argument(
        "--locations",
        action="store_true",
        help="after each instruction of the disassembly, its source location from the debug database",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if is_replay(args.module):
        from engine.cli.replay import inspect

        return inspect(args)
    from engine.runtime.vmfb.describe import metadata_lines, module_json
    from engine.runtime.vmfb.disassembler import FunctionDisassembler, module_lines
    from engine.runtime.vmfb.module import open_vmfb

    out = sys.stdout
    try:
        module = open_vmfb(args.module)
        if args.output == "metadata":
            for line in metadata_lines(module):
                out.write(line + "\n")
        elif args.output == "disassembly":
            if args.function:
                key = int(args.function) if args.function.isdigit() else args.function
                dis = FunctionDisassembler(module)
                lines = dis.function_text(
                    module.function(key), bytecode_offsets=args.bytecode_offsets, locations=args.locations
                )
                for line in lines:
                    out.write(line + "\n")
            else:
                for line in module_lines(
                    module,
                    bytecode_offsets=args.bytecode_offsets,
                    rodata=not args.no_rodata,
                    locations=args.locations,
                ):
                    out.write(line + "\n")
        elif args.output == "parameters":  # what a program compiled with external parameters loads
            from engine.runtime.vmfb.parameter_loads import describe_parameter_loads, parameter_loads

            for line in describe_parameter_loads(parameter_loads(module)):
                out.write(line + "\n")
        elif args.output == "globals":
            from engine.runtime.vmfb.global_names import describe_globals, names_beside

            for line in describe_globals(module, names_beside(args.module, module)):
                out.write(line + "\n")
        elif args.output == "executables":
            from engine.runtime.vmfb.executables import describe_executable

            for x in module.executables:
                out.write(describe_executable(x) + "\n")
            if any(is_cpu_elf(x.format) for x in module.executables):
                # A CPU library names its exports only to code that runs it: the host code's lookups name them.
                from engine.runtime.vmfb.call_sites import dispatch_call_sites

                callers: dict[str, set[str]] = {}  # export -> the functions that dispatch it
                for site in dispatch_call_sites(module):
                    if site.export:
                        callers.setdefault(site.export, set()).add(site.function_name)
                out.write(f"exports the host code dispatches (by name, hal.executable.lookup.function): {len(callers)}\n")
                for name, functions in callers.items():
                    # The initializer's run as the module loads, unseen by a call: said, with how to see them.
                    where = f" (in {INITIALIZER}, run as the module loads: --function={INITIALIZER} stops in it)"
                    out.write(f"  export {name}{where if functions == {INITIALIZER} else ''}\n")
        else:
            data = module_json(module)
            try:
                from engine.runtime.vmfb.executables import executable_details

                for entry, x in zip(data["executables"], module.executables):
                    entry["details"] = executable_details(x)
            except ImportError:
                pass
            json.dump(data, out, indent=2, default=str)
            out.write("\n")
    except FormatError as e:
        print(f"iree-lens inspect: {e}", file=sys.stderr)
        return 1
    except KeyError as e:
        print(f"iree-lens inspect: {e.args[0] if e.args else e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # the reader stopped (``| head``): not an error of the file (engine.cli.main)
    except OSError as e:
        print(f"iree-lens inspect: {e}", file=sys.stderr)
        return 1
    return 0
