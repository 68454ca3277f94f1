#!/usr/bin/env python3
"""A stand-in coding CLI: records argv, environment, cwd and the instructions file it sees.

Installed under the names claude, codex, gemini and opencode. Environment:
``FAKE_CLI_CAPTURE`` the JSON file to write; ``FAKE_CLI_EXIT`` the exit status;
``FAKE_CLI_STDERR`` a line for stderr; ``FAKE_CLI_COUNT`` a file that gets one line per
run; ``FAKE_CLI_SLEEP`` seconds to wait (signal and concurrency tests), after writing
``FAKE_CLI_CAPTURE + ".ready"``; after the wait it writes what the instructions file
holds then to ``FAKE_CLI_CAPTURE + ".end"``.
"""

import json
import os
import sys
import time

TARGETS = {
    "claude": "CLAUDE.md",
    "gemini": "GEMINI.md",
    "codex": "AGENTS.md",
    "opencode": "AGENTS.md",
}

name = os.path.basename(sys.argv[0])
target = TARGETS.get(name, "AGENTS.md")
try:
    with open(target, encoding="utf-8") as fh:
        overlay = fh.read()
except OSError:
    overlay = None
files = {}
for arg in sys.argv[1:]:
    path = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
    if path.startswith("/") and os.path.isfile(path):
        with open(path, encoding="utf-8") as fh:
            files[path] = fh.read()
for key in ("GEMINI_CLI_SYSTEM_SETTINGS_PATH",):
    if os.environ.get(key) and os.path.isfile(os.environ[key]):
        with open(os.environ[key], encoding="utf-8") as fh:
            files[os.environ[key]] = fh.read()
record = {
    "argv": sys.argv,
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "overlay": overlay,
    "files": files,
    "pid": os.getpid(),
}
if os.environ.get("FAKE_CLI_COUNT"):
    with open(os.environ["FAKE_CLI_COUNT"], "a", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()}\n")
capture = os.environ.get("FAKE_CLI_CAPTURE")
if capture:
    with open(capture, "w", encoding="utf-8") as fh:
        json.dump(record, fh)
if os.environ.get("FAKE_CLI_STDERR"):
    print(os.environ["FAKE_CLI_STDERR"], file=sys.stderr)
if os.environ.get("FAKE_CLI_SLEEP"):
    if capture:
        with open(capture + ".ready", "w") as fh:
            fh.write(str(os.getpid()))
    time.sleep(float(os.environ["FAKE_CLI_SLEEP"]))
    if capture:  # what the instructions file holds at the end of the run
        try:
            with open(target, encoding="utf-8") as fh:
                at_end = fh.read()
        except OSError:
            at_end = None
        with open(capture + ".end", "w", encoding="utf-8") as fh:
            json.dump({"overlay": at_end}, fh)
sys.exit(int(os.environ.get("FAKE_CLI_EXIT", "0")))
