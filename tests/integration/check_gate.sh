#!/bin/sh
# check_gate.sh WHYMISS PROGRAM FIXED: `whymiss check` gates on a workload and its fixed twin.
# The original's profile violates --max conflict@L1=5% (exit 1, one line naming the limit); the
# fixed twin's passes (exit 0, nothing printed); a bad limit is one sentence and exit 2.
set -u
whymiss=$1 prog=$2 fixed=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$whymiss" record -o "$tmp/a.data" -- "$prog" >/dev/null 2>&1 || { echo "FAIL: record $prog"; exit 1; }
"$whymiss" record -o "$tmp/b.data" -- "$fixed" >/dev/null 2>&1 || { echo "FAIL: record $fixed"; exit 1; }
out=$("$whymiss" check "$tmp/a.data" --max conflict@L1=5% --max-misses 1000000000 2>&1); st=$?
[ "$st" -eq 1 ] || { echo "FAIL: original: exit $st, expected 1: $out"; exit 1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: original: not one line: $out"; exit 1; }
case "$out" in
  *"conflict problems at L1"*"--max conflict@L1=5%"*) ;;
  *) echo "FAIL: original: the line does not name the kind, level and limit: $out"; exit 1 ;;
esac
out=$("$whymiss" check "$tmp/b.data" --max conflict@L1=5% 2>&1); st=$?
[ "$st" -eq 0 ] && [ -z "$out" ] || { echo "FAIL: fixed: exit $st, output '$out'"; exit 1; }
# The original also fails a miss budget it exceeds, and the level is matched without case.
out=$("$whymiss" check "$tmp/a.data" --max-misses l1=1000 2>&1); st=$?
[ "$st" -eq 1 ] || { echo "FAIL: --max-misses: exit $st: $out"; exit 1; }
out=$("$whymiss" check "$tmp/a.data" --max conflict@L9=5% 2>&1); st=$?
[ "$st" -eq 2 ] || { echo "FAIL: unknown level: exit $st: $out"; exit 1; }
out=$("$whymiss" check "$tmp/a.data" --max conflict=150% 2>&1); st=$?
[ "$st" -eq 2 ] || { echo "FAIL: bad share: exit $st: $out"; exit 1; }
echo "ok: check gates $prog and passes its fixed twin"
