#!/usr/bin/env bash
# Installs everything hostwire needs on a Debian machine: the Debian packages listed in
# scripts/apt-packages.txt and a virtual environment .venv with the pinned Python packages of
# analyze/. Safe to run again: it installs only what is missing.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

say() { printf 'hostwire setup: %s\n' "$*" >&2; }

mapfile -t wanted < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/apt-packages.txt)
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        say "missing Debian packages: ${missing[*]} (run as root or: sudo apt-get install ${missing[*]})"
        exit 1
    fi
    say "installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer no without a prompt.
    echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections
    apt-get update -qq || say "apt-get update failed; trying the cached package lists"
    # No service starts while installing (sshd, nginx, redis-server, dnsmasq): the tests start
    # their own servers inside their namespaces. A policy-rc.d already there is the machine's own.
    policy=/usr/sbin/policy-rc.d
    own_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
    fi
    status=0
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || status=$?
    if [ "$own_policy" = 1 ]; then rm -f "$policy"; fi
    [ "$status" = 0 ] || exit "$status"
    # a server package just installed here: its service stays off at boot too (a machine that
    # had the package before is not touched); the tests start their own servers
    declare -A units=([openssh-server]="ssh.service ssh.socket" [nginx]="nginx.service"
                      [redis-server]="redis-server.service" [dnsmasq]="dnsmasq.service")
    if command -v systemctl >/dev/null; then
        for pkg in "${!units[@]}"; do
            if printf '%s\n' "${missing[@]}" | grep -qx "$pkg"; then
                # shellcheck disable=SC2086  # the units are words
                systemctl disable --now ${units[$pkg]} >/dev/null 2>&1 || true
            fi
        done
    fi
fi

# The kernel collectors need tracefs; a fresh machine may not have it mounted.
if [ "$(id -u)" -eq 0 ] && ! [ -d /sys/kernel/tracing/instances ] && ! [ -d /sys/kernel/debug/tracing/instances ]; then
    mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null && say "mounted tracefs on /sys/kernel/tracing" \
        || say "could not mount tracefs on /sys/kernel/tracing (hostwire doctor tells more)"
fi

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    say "$python is older than 3.11; set PYTHON=/path/to/python3.11"
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    "$python" -m venv .venv
fi
stamp=.venv/.hostwire-requirements
if ! cmp -s analyze/requirements.txt "$stamp" 2>/dev/null; then
    say "installing Python packages into .venv"
    .venv/bin/python -m pip install -q --disable-pip-version-check -r analyze/requirements.txt
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e analyze
    cp analyze/requirements.txt "$stamp"
fi
say "ready"
