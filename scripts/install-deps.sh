#!/usr/bin/env bash
# Installs whymiss's build and test dependencies from Debian 12 packages.
# Idempotent: does nothing when every package is already installed. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential g++ clang cmake ninja-build pkg-config
      libgtest-dev libgmock-dev libbenchmark-dev
      libdw-dev libelf-dev libzydis-dev libpfm4-dev
      valgrind python3 time libclang-rt-14-dev
      libprotobuf-dev protobuf-compiler zlib1g-dev golang-go
      nlohmann-json3-dev python3-jsonschema)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "install-deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
