#!/usr/bin/env bash
# Chromium for the browser tests (pytest-playwright drives Debian's chromium; Playwright's own
# browser download is not reachable here). Prints the browser's path; installs the Debian
# package with apt-get when it is missing. Everything but the path goes to stderr.
set -euo pipefail

path=${KVCHAT_CHROMIUM:-/usr/bin/chromium}
if [[ -x $path ]]; then
    echo "$path"
    exit 0
fi
if [[ $(id -u) != 0 ]]; then
    echo "chromium.sh: $path not found; install Debian's chromium package" >&2
    exit 1
fi
echo "chromium.sh: chromium not found: installing it with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >&2
echo "$path"
