#!/usr/bin/env bash
# qemu's user-mode emulator for the CPU tests: tests/mm/test_ggml_backends.py runs the server's
# libraries on an emulated CPU without AVX-512 (QEMU's AMD EPYC-Rome: AVX2, as the machines
# where an AVX-512 build died with "Illegal instruction"). Prints the binary's path; installs
# Debian's qemu-user with apt-get when it is missing. Everything but the path goes to stderr.
set -euo pipefail

if path=$(command -v qemu-x86_64); then
    echo "$path"
    exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "qemu.sh: qemu-x86_64 not found; install Debian's qemu-user package" >&2
    exit 1
fi
echo "qemu.sh: qemu-x86_64 not found: installing qemu-user with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends qemu-user >&2
command -v qemu-x86_64
