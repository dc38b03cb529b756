#!/usr/bin/env bash
# Builds stand-ins for the public images the Dockerfile and docker-compose.yml name (python, redis, nginx) from
# Debian's packages, for machines that reach Debian's mirror but no image registry (CI here). Each is built only
# when its tag is absent, so real images, where present, are used as they are. Needs root, docker and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."

debian=agui-standin/debian:bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca_bundle=${AGUI_STANDIN_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}

have() { docker image inspect "$1" >/dev/null 2>&1; }

if ! have "$debian"; then
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "+ debootstrap bookworm -> $debian"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$debian" >/dev/null
fi

# The names the project uses: the Dockerfile's default base, and compose's Redis and nginx images.
python_image=$(sed -n 's/^ARG BASE_IMAGE=//p' deploy/Dockerfile)
redis_image=$(awk '/^  redis:/{s=1} s && /image:/{print $2; exit}' docker-compose.yml)
nginx_image=$(awk '/^  lb:/{s=1} s && /image:/{print $2; exit}' docker-compose.yml)

context=$(mktemp -d)
cp deploy/standin/*.Dockerfile "$context"/
cp "$ca_bundle" "$context"/ca-certificates.crt
for pair in "python:$python_image" "redis:$redis_image" "nginx:$nginx_image"; do
  kind=${pair%%:*} image=${pair#*:}
  if ! have "$image"; then
    echo "+ stand-in $image (deploy/standin/$kind.Dockerfile)"
    docker build -q --build-arg "DEBIAN=$debian" -f "$context/$kind.Dockerfile" -t "$image" "$context" >/dev/null
  fi
done
rm -rf "$context"
