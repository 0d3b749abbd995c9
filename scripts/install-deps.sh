#!/usr/bin/env bash
# Installs whymiss's build and test dependencies from Debian 12 packages, and the npm packages
# the HTML report embeds (package-lock.json, with npm ci, into node_modules).
# Idempotent: does nothing when every package is already installed. Needs root (or sudo).
set -euo pipefail
pkgs=(build-essential g++ clang cmake ninja-build pkg-config
      libgtest-dev libgmock-dev libbenchmark-dev
      libdw-dev libelf-dev libzydis-dev libpfm4-dev
      valgrind python3 time libclang-rt-14-dev
      libprotobuf-dev protobuf-compiler zlib1g-dev golang-go chromium
      nlohmann-json3-dev python3-jsonschema gcc-12-plugin-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm: whichever Node.js the machine has, else Debian's.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -ne 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# npm ci writes node_modules/.package-lock.json: newer than the lock file means up to date.
cd "$(dirname "$0")/.."
if [ ! node_modules/.package-lock.json -nt package-lock.json ]; then
  echo "install-deps: npm ci" >&2
  npm ci --ignore-scripts --no-audit --no-fund >/dev/null
fi
