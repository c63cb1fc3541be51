"""Reading npusim's report JSON for the plotting scripts: one place for its checks and error messages."""
import json
import os
import sys


def fail(msg):
    """A clear one-line error naming the script, exit status 2 (no traceback)."""
    print(f"{os.path.basename(sys.argv[0])}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_report(path):
    """The report written by `npusim run --report FILE.json`; fails clearly on any other file."""
    try:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
    except OSError as e:
        fail(f"cannot open {path}: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        fail(f"{path} is not JSON; give the report written by `npusim run --report FILE.json`")
    if not isinstance(r, dict) or "total_cycles" not in r or not isinstance(r.get("layers"), list):
        fail(f"{path} is JSON but not an npusim report (no total_cycles and layers[])")
    return r
