"""The ``iree-lens`` sub-commands on IREE's own HAL replays (``.ireereplay``).

``inspect``, ``capture``, ``run``... hand a path ending in ``.ireereplay`` to the functions here:

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
