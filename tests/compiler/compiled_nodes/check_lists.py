#!/usr/bin/env python3
"""The compiled node-test list keeps up with the interpreter's (docs/node_tests.md).

usage: check_lists.py NODE_TESTS_IN_SCOPE.txt COMPILED_IN_SCOPE.txt COMPILED_OUT_OF_SCOPE.txt

Every test of the interpreter's in-scope list is compiled (in COMPILED_IN_SCOPE) or listed with a reason
(COMPILED_OUT_OF_SCOPE: the name, a tab, the reason); no test is in both, none is in either without being
in the interpreter's list. Prints each violation and exits 1 if there is one.
"""
import sys


def entries(path):
    """(name, reason) of each line that is not blank or a comment."""
    for line in open(path):
        line = line.rstrip("\n")
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition("\t")
            yield name.strip(), reason.strip()


def main():
    interp = {n for n, _ in entries(sys.argv[1])}
    compiled = {n for n, _ in entries(sys.argv[2])}
    out = dict(entries(sys.argv[3]))
    problems = [f"'{n}' in {sys.argv[3]} has no reason" for n, why in sorted(out.items()) if not why]
    problems += [f"'{n}' is both compiled and out of scope" for n in sorted(compiled & set(out))]
    problems += [f"'{n}' is not in the interpreter's list" for n in sorted((compiled | set(out)) - interp)]
    problems += [f"'{n}' is neither compiled nor listed out of scope with a reason"
                 for n in sorted(interp - compiled - set(out))]
    for p in problems:
        print("FAIL:", p)
    print(f"{len(interp)} interpreted, {len(compiled)} compiled, {len(out)} out of scope, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
