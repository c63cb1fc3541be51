#!/usr/bin/env python3
"""Checks that docs/report.md's field tables and the reports npusim writes name the same fields.

usage: check_report_docs.py DOCS.md REPORT.json...

The field names are the backticked names in the first column of the tables under "## Fields" (up to the
next "## " heading): `a.b`, `a.{b,c}` (both), `layers[].x` (a member of every element of an array),
`units.<name>` (any key), and a bare name after a dotted one in the same cell (`layers[].start_cycle`,
`end_cycle`) takes the first one's parent. A report's fields are the paths of its JSON members, array
elements as `[]` and the unit names as `<name>`.

Two checks, both must hold:
- every field a report writes is documented: its path is a documented name, or lies below a documented
  name none of whose members are documented (`accuracy`, `run.parameters`: documented as a whole);
- every documented name is written by some report, for each top-level section that some report writes
  (so the reports given decide which optional sections are checked).
Prints each mismatch; exits 1 if there is one.
"""
import json
import re
import sys


def documented_names(md_text):
    names = set()
    in_fields = False
    for line in md_text.splitlines():
        if line.startswith("## "):
            in_fields = line.strip() == "## Fields"
            continue
        if not in_fields or not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        parent = ""
        for i, raw in enumerate(re.findall(r"`([^`]+)`", cell)):
            m = re.fullmatch(r"(.*)\{([^}]*)\}(.*)", raw)
            expanded = [m.group(1) + x.strip() + m.group(3) for x in m.group(2).split(",")] if m else [raw]
            for name in expanded:
                if i > 0 and "." not in name and "[" not in name and parent:
                    name = parent + name
                names.add(name)
            if i == 0:
                first = expanded[0]
                cut = max(first.rfind("."), first.rfind("[]") + 1 if "[]" in first else -1)
                parent = first[: cut + 1] if cut >= 0 else ""
    return names


def written_paths(value, path, out):
    if path:
        out.add(path)
    if isinstance(value, dict):
        for key, child in value.items():
            name = "<name>" if path == "units" else key
            written_paths(child, f"{path}.{name}" if path else name, out)
    elif isinstance(value, list):
        for child in value:
            written_paths(child, path + "[]", out)


def parent_of(path):
    cut = max(path.rfind("."), path.rfind("[]"))
    if cut < 0:
        return None
    return path[:cut] if path[cut] == "." else path[: cut]


def covered(path, names):
    """The path is documented: itself, or below a documented name none of whose members are documented."""
    if path in names:
        return True
    p = parent_of(path)
    while p is not None:
        if p in names:
            return not any(n.startswith(p + ".") or n.startswith(p + "[]") for n in names)
        p = parent_of(p)
    return False


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        names = documented_names(f.read())
    written = set()
    for report in sys.argv[2:]:
        with open(report, encoding="utf-8") as f:
            written_paths(json.load(f), "", written)
    problems = []
    for path in sorted(written):
        if not covered(path, names) and not any(n.startswith(path + ".") or n.startswith(path + "[]") for n in names):
            problems.append(f"written but not in {sys.argv[1]}: {path}")
    sections = {re.split(r"[.\[]", p)[0] for p in written}
    for name in sorted(names):
        if re.split(r"[.\[]", name)[0] not in sections:
            continue
        if name not in written and not (name.endswith("[]") and name[:-2] in written):  # [] : empty
            problems.append(f"documented but not written by these reports: {name}")
    for p in problems:
        print(p)
    print(f"{len(names)} documented names, {len(written)} written paths, {len(problems)} mismatches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
