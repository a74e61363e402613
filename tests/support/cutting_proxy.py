"""A session server behind a link that drops: ``python cutting_proxy.py MARKER COMMAND...`` runs COMMAND
(``iree-lens serve --stdio``), forwards both ways, and kills the server (and ends) just before forwarding
the client's frame that contains MARKER (bytes, e.g. ``"ReadTensors"``): the connection is lost while the
client waits for that command's answer."""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def main() -> None:
    marker = sys.argv[1].encode()
    server = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def answers() -> None:
        while chunk := os.read(server.stdout.fileno(), 1 << 16):
            os.write(1, chunk)

    threading.Thread(target=answers, daemon=True).start()
    while chunk := os.read(0, 1 << 16):
        if marker in chunk:
            server.kill()
            server.wait()
            os._exit(3)
        server.stdin.write(chunk)
        server.stdin.flush()
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
