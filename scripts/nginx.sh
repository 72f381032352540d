#!/usr/bin/env bash
# nginx for `make cluster` and the cluster tests (Debian's nginx-light: consistent hashing,
# proxying; no modules we do not use). Prints the binary's path; installs the package with
# apt-get when nginx is missing. Everything but the path goes to stderr. The package's own
# service is not needed: the cluster runs nginx unprivileged under a prefix of its own.
set -euo pipefail

find_nginx() { command -v nginx || { [[ -x /usr/sbin/nginx ]] && echo /usr/sbin/nginx; }; }

if path=$(find_nginx); then
    echo "$path"
    exit 0
fi
if [[ $(id -u) != 0 ]]; then
    echo "nginx.sh: nginx not found; install Debian's nginx-light package" >&2
    exit 1
fi
echo "nginx.sh: nginx not found: installing nginx-light with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >&2
# A policy-rc.d that says no: the package's service is not started (there may be no init system
# at all); one already there is left as it is.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
fi
apt-get install -y -q --no-install-recommends nginx-light >&2
find_nginx
