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

SUFFIX = ".ireereplay"


def is_replay(path: str | None) -> bool:
    return bool(path) and str(path).endswith(SUFFIX)


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
    from engine.replay.capture import capture_replay
    from engine.replay.execute import Substitution

    if args.function or args.input or args.sources or args.type or args.engine != "debug":
        print(
            "iree-lens capture: a replay is a whole recorded run: --function, --input, --sources, --type and "
            "--engine=reference do not apply",
            file=sys.stderr,
        )
        return 2
    try:
        substitutions = [Substitution.parse(s) for s in getattr(args, "substitute", None) or []]
        result = capture_replay(args.module, args.out, device=args.device, substitutions=substitutions)
    except LensError as e:
        print(f"iree-lens capture: {e}", file=sys.stderr)
        return 1
    if args.dot:
        from engine.dispatch.bundle import Bundle
        from engine.dispatch.graph import dependency_graph

        with open(args.dot, "w") as f:
            f.write(dependency_graph(Bundle(result.directory).dispatches).to_dot())
    print(
        f"captured {result.dispatches} dispatches of {args.module} into {result.directory} "
        f"({result.bytes_written} bytes of tensors)"
    )
    return 0
