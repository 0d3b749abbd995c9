#!/usr/bin/env bash
# README command 1: install, build, and run whymiss's main job on a bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
echo "== whymiss simulate examples/false-sharing.trace --cores 2" >&2
build/bin/whymiss simulate examples/false-sharing.trace --cores 2
