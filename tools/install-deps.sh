#!/bin/sh
# Installs the Debian 12 packages holod needs to build, run and test.
# Idempotent: installs only what is missing. Needs root or sudo.
set -eu

PKGS="build-essential meson ninja-build pkg-config
libx11-dev libxext-dev libxtst-dev libxi-dev libxrandr-dev libxdo-dev
libsqlite3-dev libpng-dev libjansson-dev libpcre2-dev libmicrohttpd-dev
libcurl4-openssl-dev zlib1g-dev nettle-dev scdoc jq
libboost-context-dev
libdnnl-dev
cmake python3-venv
xvfb xauth x11-utils xterm openbox mousepad curl sqlite3 util-linux passwd
chromium clang-format"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
