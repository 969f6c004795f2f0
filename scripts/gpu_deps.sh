#!/usr/bin/env bash
# Unpacks the header-only/source dependencies (CLI11, nlohmann-json, GoogleTest sources) from
# Debian packages into .deps/, for machines that cannot install packages (the GPU machine has
# no network). Run here; `.deps` is then carried to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps && cd .deps
apt-get download libcli11-dev nlohmann-json3-dev googletest
for f in *.deb; do dpkg -x "$f" .; done
