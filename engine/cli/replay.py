"""The ``iree-lens`` sub-commands on IREE's own HAL replays (``.ireereplay``).

``inspect``, ``capture``, ``run``... hand a path ending in ``.ireereplay`` to the functions here:

* ``capture RUN.ireereplay --out=DIR [--device=...]``: reissue the replay on the debug engine and write
  the capture bundle of every dispatch (``engine/replay/capture.py``);
* ``inspect RUN.ireereplay``: scopes, objects, host calls, executables and the dispatches in the order
  the queue ran them; ``--output=json`` the same as one JSON document with every record as
  ``iree-dump-replay --format=jsonl`` projects it; ``--output=executables`` the captured executables.
"""

from __future__ import annotations

import argparse
import json
import sys

from engine.errors import LensError

# A replay records its executables but not the device it ran on; the CPU runs any llvm-cpu/VMVX replay.
REPLAY_DEVICE = "local-sync"


def inspect(args: argparse.Namespace) -> int:
    from engine.replay.model import describe_replay, description_lines
    from engine.replay.projection import jsonl_rows
    from engine.replay.reader import open_replay

    out = sys.stdout
    try:
        replay = open_replay(args.module)
        description = describe_replay(replay)
        if args.output == "json":
            rows = jsonl_rows(replay)
            doc = {"file": next(rows), "summary": next(rows), **description.to_json(), "records": list(rows)}
            json.dump(doc, out, indent=1)
            out.write("\n")
        elif args.output == "executables":
            for x in description.executables:
                out.write(f"executable {x.object_id}: {x.format}, {x.data.length} bytes at {x.data.offset}\n")
                for i, name in enumerate(x.functions):
                    out.write(f"  [{i}] {name}\n")
        else:
            for line in description_lines(description):
                out.write(line + "\n")
    except LensError as e:
        print(f"iree-lens inspect: {e}", file=sys.stderr)
        return 1
    return 0


def capture(args: argparse.Namespace) -> int:
    args.device = args.device or REPLAY_DEVICE
    from engine.replay.capture import capture_replay
    from engine.replay.execute import Substitution

    if args.function or args.input or args.engine != "debug":
        print(
            "iree-lens capture: a replay is a whole recorded run: --function, --input and --engine=reference "
            "do not apply",
            file=sys.stderr,
        )
        return 2
    try:
        from engine.cli.capture import parse_overrides, report_bundle
        from engine.dispatch.tensor_types import interfaces_from_files

        substitutions = [Substitution.parse(s) for s in getattr(args, "substitute", None) or []]
        result = capture_replay(
            args.module,
            args.out,
            device=args.device,
            substitutions=substitutions,
            interfaces=interfaces_from_files(args.sources) if args.sources else None,
            overrides=parse_overrides(args.type),
        )
    except LensError as e:
        print(f"iree-lens capture: {e}", file=sys.stderr)
        return 1
    for note in result.notes:
        print(f"iree-lens capture: {note}", file=sys.stderr)
    report_bundle(result, args.module, args.dot)
    return 0


def _whole_library(data: bytes, executable, replay_path: str) -> bytes:
    """A one-dispatch build (``data``) of an executable the replay captured linked with other dispatches (IREE
    links a module's CPU dispatches into one library): merged into the captured library, so every other
    function stays (the replay looks its dispatches up by name: the one-kernel build alone lacked them)."""
    if len(executable.functions) < 2 or not executable.format.startswith("embedded-elf"):
        return data
    from engine.replay.reader import open_replay
    from engine.runtime.hal.cpu_library import CpuExecutableLibrary
    from engine.substitute.elf_merge import merge_exports

    with CpuExecutableLibrary.load(data, "substitution") as built:
        names = tuple(e.name for e in built.exports)
    if set(executable.functions) <= set(names):
        return data
    missing = [n for n in names if n not in executable.functions]
    if missing:
        raise LensError(f"the built executable exports {', '.join(missing)}, which replay executable "
                        f"{executable.object_id} does not have ({', '.join(executable.functions)})")  # fmt: skip
    replay = open_replay(replay_path)
    try:
        base = bytes(replay.range_bytes(executable.data))
    finally:
        replay.close()
    return merge_exports(base, data, names)


def _substitution_binary(data: bytes):
    """``data`` kept where ``iree-run-replay``'s substitution flag can name it, outside the user's folders:
    a file of the temporary directory named after its bytes."""
    import hashlib
    import os
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.gettempdir()) / "iree-lens-substitutions"
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / f"{hashlib.sha256(data).hexdigest()[:20]}.bin"
    if not binary.exists():
        # Whole or not at all: another process may find the file (by its name) while this one writes it.
        partial = binary.with_suffix(f".{os.getpid()}.part")
        partial.write_bytes(data)
        partial.replace(binary)
    return binary


def substitutions_from_specs(specs: list[str], replay_path: str) -> list:
    """``--substitute`` for a replay: ``ID[@FORMAT]=BINARY`` or ``all=BINARY`` as ``iree-run-replay`` takes
    them, or ``NAME=SOURCE.mlir`` (NAME an executable object id, an export, or IREE's executable name such
    as ``main_dispatch_0``): the source is compiled to a binary (one dispatch of a linked CPU library merged
    into the captured library) kept in the temporary directory, not beside the source, so the same
    substitution can be handed to ``iree-run-replay``."""
    from pathlib import Path

    from engine.replay.execute import Substitution
    from engine.replay.model import describe_replay
    from engine.replay.reader import open_replay

    out = []
    executables = None
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not path:
            raise LensError(f"bad --substitute {spec!r}: expected ID=BINARY or NAME=SOURCE.mlir")
        if executables is None:
            executables = describe_replay(open_replay(replay_path)).executables
        if not path.endswith(".mlir"):
            substitution = Substitution.parse(spec)
            ids = [x.object_id for x in executables]
            if substitution.executable_id is not None and substitution.executable_id not in ids:
                known = ", ".join(f"{x.object_id} ({', '.join(x.functions)})" for x in executables)
                raise LensError(
                    f"--substitute {spec!r}: the replay has no executable {substitution.executable_id}; "
                    f"its executables are: {known or 'none'}"
                )
            out.append(substitution)
            continue
        from engine.substitute.build import compile_executable_source

        matches = [
            x
            for x in executables
            if name == str(x.object_id) or any(fn == name or fn.startswith(name + "_") for fn in x.functions)
        ]
        if len(matches) != 1:
            known = ", ".join(f"{x.object_id} ({', '.join(x.functions)})" for x in executables)
            raise LensError(
                f"--substitute {name!r} names {len(matches)} executables of the replay; they are: {known}"
            )
        data = compile_executable_source(Path(path))
        data = _whole_library(data, matches[0], replay_path)
        binary = _substitution_binary(data)
        out.append(Substitution(matches[0].object_id, data, None, str(binary)))
    return out


def run(args: argparse.Namespace) -> int:
    """``iree-lens run RUN.ireereplay [--device=] [--substitute=...] [--output=...]``: the replay on the
    debug engine; prints each buffer the host read at the end (raw bytes: a replay has no types)."""
    args.device = args.device or REPLAY_DEVICE
    import hashlib

    import numpy as np

    from engine.dispatch.tensor_types import to_storage
    from engine.replay.execute import ReplayExecutor
    from engine.replay.reader import open_replay
    from engine.replay.trace_capture import host_reads
    from engine.runtime.hal.devices import create_device

    if args.function or args.input or args.engine != "debug" or getattr(args, "golden", None):
        print(
            "iree-lens run: a replay is a whole recorded run on the debug engine: --function, --input, --golden "
            "and --engine=reference do not apply (IREE's engine for replays is iree-run-replay)",
            file=sys.stderr,
        )
        return 2
    try:
        substitutions = substitutions_from_specs(args.substitute, args.module)
        replay = open_replay(args.module)
        device = create_device(args.device)
        written = None
        if args.output:  # typed from the dispatch that wrote them (engine.replay.typed_reads)
            from engine.dispatch.snapshot import DispatchSnapshots
            from engine.dispatch.typed_tensors import find_sources
            from engine.replay.typed_reads import WrittenTensors

            snapshots = DispatchSnapshots(device, find_sources(args.module, getattr(args, "sources", ()) or ()))
            device.add_observer(snapshots)
            written = WrittenTensors()
            snapshots.subscribe(written)
            written.attach(device)
        executor = ReplayExecutor(replay, device, substitutions=substitutions)
        state = executor.run()
        ranges: list[tuple[int, int, int]] = []
        for _, buffer, offset, length in host_reads(replay):
            if (buffer, offset, length) not in ranges:
                ranges.append((buffer, offset, length))
        print(f"REPLAY {args.module}: {device.dispatch_count} dispatches on {device.name}")
        for s in substitutions:
            print(f"substituted executable {s.executable_id if s.executable_id is not None else 'all'}: "
                  f"IREE's replay runs the same with {s.to_flag()}")  # fmt: skip
        outputs = []
        for i, (buffer, offset, length) in enumerate(ranges):
            if buffer not in state.buffers:
                continue
            hal_buffer = state.buffers[buffer].allocated_buffer
            data = np.array(hal_buffer.read_view(offset, length), copy=True)
            typed, what = written.typed(hal_buffer, offset, length, data) if written is not None else (data, "")
            outputs.append((typed, what))
            head = " ".join(f"{b:02x}" for b in data[:16].tolist())
            print(
                f"read[{i}]: buffer {buffer} [{offset}, +{length}] sha256={hashlib.sha256(data.tobytes()).hexdigest()[:16]}"
                f" bytes={head}{' ...' if length > 16 else ''}" + (f" as {what}" if what else "")
            )
        if len(args.output) > len(outputs):
            missing = ", ".join(args.output[len(outputs):])
            raise LensError(f"the replay records {len(outputs)} buffer read(s) by the host: nothing to write to {missing}")
        for target, (data, what) in zip(args.output, outputs):
            if target.startswith("@"):
                np.save(target[1:], to_storage(data))
                if "untyped" in what:
                    print(f"iree-lens run: {target[1:]}: {what}; --sources types it", file=sys.stderr)
        if getattr(args, "write_replay", None):
            from engine.replay.writer import rewrite_replay

            written = rewrite_replay(
                replay,
                args.write_replay,
                substitutions={s.executable_id: (s.data, s.format) for s in substitutions},
            )
            print(f"wrote {written} (iree-run-replay --device={args.device} {written})")
    except LensError as e:
        print(f"iree-lens run: {e}", file=sys.stderr)
        return 1
    return 0


def profile(args: argparse.Namespace) -> int:
    args.device = args.device or REPLAY_DEVICE
    if args.function or args.input:
        print(
            "iree-lens profile: a replay is a whole recorded run, profiled on the debug engine (--function and "
            "--input do not apply; IREE's own profile: iree-benchmark-replay --device_profiling_mode=...)",
            file=sys.stderr,
        )
        return 2
    from engine.cli.profile import write_profile
    from engine.replay.profile import profile_replay

    try:
        write_profile(profile_replay(args.module, args.device, args.repeat), args.out)
    except (LensError, OSError) as e:
        print(f"iree-lens profile: {e}", file=sys.stderr)
        return 1
    return 0


def debug(args: argparse.Namespace) -> int:
    """``iree-lens debug RUN.ireereplay --commands=FILE [--json]`` (``engine/replay/debugger.py``)."""
    args.device = args.device or REPLAY_DEVICE
    from engine.cli.debug import read_commands
    from engine.replay.debugger import ReplayDebugger, check_for_replay

    if args.function or args.input or args.engine != "debug" or getattr(args, "remote", None):
        print(
            "iree-lens debug: a replay is a whole recorded run debugged on the debug engine here: --function, "
            "--input, --engine=reference and --remote do not apply",
            file=sys.stderr,
        )
        return 2
    commands = read_commands(args.commands, check_for_replay)
    if commands is None:
        return 2
    try:
        debugger = ReplayDebugger(
            args.module, args.device, commands, sys.stdout, sys.stderr, as_json=args.json,
            sources=tuple(getattr(args, "sources", ())),
        )
        return debugger.run()
    except LensError as e:
        print(f"iree-lens debug: {e}", file=sys.stderr)
        return 1
