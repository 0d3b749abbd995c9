#!/bin/sh
# Helper for the CTest tests of tests/workloads/.
#
#   check.sh status EXPECTED PROG [ARGS...]
#       Runs PROG; passes if its exit status, as a POSIX shell reports it
#       (128+N when killed by signal N), equals EXPECTED and it wrote exactly
#       one non-empty line to stdout.
#   check.sh same PROG_A PROG_B [ARGS...]
#       Runs both with the same ARGS; passes if both exit 0 and print the
#       same single stdout line (buggy program vs its -DWHYMISS_FIXED twin).
#
# Core dumps are disabled (the crash test segfaults on purpose).
ulimit -c 0 2>/dev/null

one_line() {
  # $1: captured stdout (command substitution strips trailing newlines)
  [ -n "$1" ] || return 1
  [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ]
}

mode=$1
shift
case "$mode" in
status)
  expected=$1
  shift
  out=$("$@")
  st=$?
  if [ "$st" -ne "$expected" ]; then
    echo "FAIL: $1 exited with status $st, expected $expected" >&2
    exit 1
  fi
  if ! one_line "$out"; then
    echo "FAIL: $1 did not print exactly one line; stdout was:" >&2
    printf '%s\n' "$out" >&2
    exit 1
  fi
  printf '%s\n' "$out"
  ;;
same)
  a=$1
  b=$2
  shift 2
  out_a=$("$a" "$@") || { echo "FAIL: $a exited with status $?" >&2; exit 1; }
  out_b=$("$b" "$@") || { echo "FAIL: $b exited with status $?" >&2; exit 1; }
  if ! one_line "$out_a" || [ "$out_a" != "$out_b" ]; then
    echo "FAIL: outputs differ or are not one line:" >&2
    printf '%s: %s\n%s: %s\n' "$a" "$out_a" "$b" "$out_b" >&2
    exit 1
  fi
  printf '%s\n' "$out_a"
  ;;
*)
  echo "usage: $0 status EXPECTED PROG [ARGS...] | same PROG_A PROG_B [ARGS...]" >&2
  exit 2
  ;;
esac
