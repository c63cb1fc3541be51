#!/bin/bash
# Checks that every C++ file of the repository is formatted by .clang-format (Debian 12's clang-format 14),
# or, with --fix, formats them in place. Prints each file that differs and exits 1 when one does.
#
# Usage: scripts/check_format.sh [--fix] [--clang-format BIN]
# Exit status: 0 formatted, 1 a file is not, 2 usage or setup error.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FMT=clang-format
fix=0
while (($#)); do
  case $1 in
    --fix) fix=1; shift ;;
    --clang-format) FMT=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "check_format.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v "$FMT" >/dev/null || { echo "check_format.sh: $FMT not found (Debian package clang-format)" >&2; exit 2; }
cd "$ROOT"
# The files git tracks, or (outside a git checkout, e.g. an exported tarball) the tree's own.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.h' '*.cpp')
else
  mapfile -t files < <(find isa arch compiler traces sim tests -name '*.h' -o -name '*.cpp' | sort)
fi
((${#files[@]})) || { echo "check_format.sh: no C++ files found under $ROOT" >&2; exit 2; }
if ((fix)); then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$FMT" -i --style=file
  echo "formatted ${#files[@]} files"
  exit 0
fi
# One clang-format process per 50 files; its errors name each file ("FILE:LINE:COL: error: code should
# be clang-formatted").
bad=$(printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$FMT" --style=file --dry-run -Werror 2>&1 >/dev/null |
      sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
if [[ -n $bad ]]; then
  echo "$bad" | sed 's/^/not formatted: /'
  echo "check_format.sh: $(echo "$bad" | wc -l) of ${#files[@]} files are not formatted; run scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "all ${#files[@]} C++ files formatted"
