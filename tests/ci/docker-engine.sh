#!/usr/bin/env bash
# Install docker.io and start dockerd when it is not running. Idempotent; needs root.
set -euo pipefail
if docker info >/dev/null 2>&1; then echo "docker engine: running"; exit 0; fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker engine: installing docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi
echo "docker engine: starting dockerd"
mkdir -p /var/log
nohup dockerd >/var/log/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then echo "docker engine: ready"; exit 0; fi
  sleep 1
done
echo "docker engine: dockerd did not start; see /var/log/dockerd.log" >&2
tail -20 /var/log/dockerd.log >&2 || true
exit 1
