#!/bin/sh
# whymiss-cc -static: a non-zero exit and one line naming the cause, no output file.
# usage: static_refused.sh WHYMISS_CC SOURCE
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
if "$1" -static "$2" -o "$dir/prog" >"$dir/err" 2>&1; then echo "a static link succeeded"; exit 1; fi
cat "$dir/err"
grep -q 'static linking is not supported' "$dir/err" || exit 1
[ "$(wc -l <"$dir/err")" -eq 1 ] || exit 1
[ ! -e "$dir/prog" ] || exit 1
