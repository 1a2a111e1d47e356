#!/usr/bin/env bash
# Make the root filesystem of the docker tests' base image from Debian packages only (no registry):
#
#     bash tests/ci/build-test-base.sh            # prints the path of the cached rootfs tarball
#
# debootstrap --variant=minbase bookworm with python3 + python3-venv into a scratch folder, packed as
# a tarball under /var/cache/repro-test-base/ (REPRO_TEST_BASE_CACHE). Later runs on the same
# machine find the tarball and skip debootstrap. tests/docker_base.py imports it with the Docker SDK.
# Idempotent, needs root; concurrent callers wait on a lock instead of racing.
set -euo pipefail

SUITE=bookworm
INCLUDE=python3,python3-venv
CACHE=${REPRO_TEST_BASE_CACHE:-/var/cache/repro-test-base}
# The name carries what went in, so a changed package list never reuses an old tarball.
TARBALL="$CACHE/$SUITE-minbase-${INCLUDE//,/-}.tar"

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

if [[ -s "$TARBALL" && -s "$TARBALL.sha256" ]]; then
  echo "$TARBALL"
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  echo "build-test-base: installing debootstrap" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq debootstrap >/dev/null
fi

# The host's own Debian mirror (the only registry reachable here), unless overridden.
MIRROR=${REPRO_DEBIAN_MIRROR:-}
if [[ -z "$MIRROR" && -f /etc/apt/sources.list.d/debian.sources ]]; then
  MIRROR=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
MIRROR=${MIRROR:-http://deb.debian.org/debian}

ROOTFS=$(mktemp -d "$CACHE/rootfs.XXXXXX")
trap 'rm -rf "$ROOTFS" "$TARBALL.partial"' EXIT
echo "build-test-base: debootstrap $SUITE ($INCLUDE) from $MIRROR" >&2
start=$(date +%s)
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOTFS" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
  echo "build-test-base: debootstrap failed; last lines of $CACHE/debootstrap.log:" >&2
  tail -20 "$CACHE/debootstrap.log" >&2
  exit 1
}
# Package caches and docs only make the image bigger; the tests never use apt inside it.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/* \
       "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/*
tar --numeric-owner --sort=name -C "$ROOTFS" -cf "$TARBALL.partial" .
sha256sum "$TARBALL.partial" | awk '{print $1}' >"$TARBALL.sha256"
mv "$TARBALL.partial" "$TARBALL"
echo "build-test-base: $(du -h "$TARBALL" | cut -f1) in $(( $(date +%s) - start ))s" >&2
echo "$TARBALL"
