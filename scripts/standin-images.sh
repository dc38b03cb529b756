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

# The names the project uses: the Dockerfile's default base, and compose's Redis and nginx images.
python_image=$(sed -n 's/^ARG BASE_IMAGE=//p' deploy/Dockerfile)
redis_image=$(awk '/^  redis:/{s=1} s && /image:/{print $2; exit}' docker-compose.yml)
nginx_image=$(awk '/^  lb:/{s=1} s && /image:/{print $2; exit}' docker-compose.yml)
missing=()
for pair in "python=$python_image" "redis=$redis_image" "nginx=$nginx_image"; do
  have "${pair#*=}" || missing+=("$pair")
done
[ ${#missing[@]} -gt 0 ] || exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! have "$debian"; then
  echo "+ debootstrap bookworm -> $debian"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >/dev/null
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
  tar -C "$work/rootfs" -c . | docker import - "$debian" >/dev/null
  rm -rf "$work/rootfs"
fi
mkdir "$work/context"
cp deploy/standin/*.Dockerfile "$work/context"/
cp "$ca_bundle" "$work/context/ca-certificates.crt"
for pair in "${missing[@]}"; do
  kind=${pair%%=*} image=${pair#*=}
  echo "+ stand-in $image (deploy/standin/$kind.Dockerfile)"
  docker build -q --build-arg "DEBIAN=$debian" -f "$work/context/$kind.Dockerfile" -t "$image" "$work/context" >/dev/null
done
