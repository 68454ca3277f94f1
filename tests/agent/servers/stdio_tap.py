"""Run a stdio MCP server, appending every line the client sends it to a log.

Usage: ``stdio_tap.py LOG COMMAND [ARGS...]``. The server's stdout and stderr are the
tap's own, so only the client-to-server direction passes through here: the log shows
exactly which JSON-RPC messages (``tools/call`` requests included) reached the server.
"""

from __future__ import annotations

import subprocess
import sys


def main(argv: list[str]) -> int:
    log, command = argv[0], argv[1:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert child.stdin is not None
    with open(log, "ab") as out:
        for line in sys.stdin.buffer:
            out.write(line)
            out.flush()
            child.stdin.write(line)
            child.stdin.flush()
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
