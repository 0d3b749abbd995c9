#!/usr/bin/env bash
# README command 1: install, build, and run whymiss's main job on a bundled example: a program
# with false sharing, rebuilt with whymiss-cc and profiled in exact mode.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p build/demo
echo "== build/bin/whymiss-cc -O2 tests/workloads/false_sharing_app.c -o build/demo/false_sharing_app" >&2
build/bin/whymiss-cc -O2 -std=c11 -pthread tests/workloads/false_sharing_app.c -o build/demo/false_sharing_app
echo "== build/bin/whymiss run -o build/demo/whymiss.data -- build/demo/false_sharing_app" >&2
build/bin/whymiss run -o build/demo/whymiss.data -- build/demo/false_sharing_app
