#!/usr/bin/env bash
# Builds the gateway's linux/arm64 image on an amd64 host with no registry, under qemu user emulation from
# Debian's packages (qemu-user-static): registers qemu-aarch64 with binfmt_misc's F flag (the interpreter is
# opened once, so it works inside containers too), then builds an arm64 Debian base with debootstrap, Debian's
# python3 on it (deploy/standin/python.Dockerfile), and deploy/Dockerfile on that base. The two bases are built
# only when their tags are absent, the image on every run. Where a registry answers, `docker buildx build
# --platform linux/arm64,linux/amd64` (deploy/README.md) does all of this. Needs root, docker, debootstrap and
# qemu-user-static.
# Usage: scripts/arm64-image.sh [TAG]   (default agui-gateway:arm64)
set -euo pipefail
cd "$(dirname "$0")/.."

tag=${1:-agui-gateway:arm64}
debian=agui-standin/debian:bookworm-arm64
python=agui-standin/python:bookworm-arm64
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca_bundle=${AGUI_STANDIN_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
qemu=$(command -v qemu-aarch64-static) || { echo "qemu-aarch64-static is missing (apt-get install qemu-user-static)" >&2; exit 1; }
have() { docker image inspect "$1" >/dev/null 2>&1; }

binfmt=/proc/sys/fs/binfmt_misc
[ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt"
if ! grep -q "^interpreter $qemu\$" "$binfmt/qemu-aarch64" 2>/dev/null || ! grep -q '^flags: .*F' "$binfmt/qemu-aarch64"; then
  [ -e "$binfmt/qemu-aarch64" ] && echo -1 > "$binfmt/qemu-aarch64"
  # ELF64, little endian, e_machine 0xb7 (AArch64); binfmt_misc decodes the \x escapes itself.
  printf '%s' ":qemu-aarch64:M::\\x7fELF\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00:\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff:$qemu:F" \
    > "$binfmt/register"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! have "$debian"; then
  echo "+ debootstrap --arch=arm64 bookworm -> $debian"
  debootstrap --arch=arm64 --variant=minbase bookworm "$work/rootfs" "$mirror" >/dev/null
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
  tar -C "$work/rootfs" -c . | docker import --platform linux/arm64 - "$debian" >/dev/null
  rm -rf "$work/rootfs"
fi
if ! have "$python"; then
  echo "+ stand-in $python (deploy/standin/python.Dockerfile)"
  mkdir "$work/context"
  cp deploy/standin/python.Dockerfile "$work/context/"
  cp "$ca_bundle" "$work/context/ca-certificates.crt"
  DOCKER_BUILDKIT=0 docker build -q --build-arg "DEBIAN=$debian" -f "$work/context/python.Dockerfile" -t "$python" "$work/context" >/dev/null
fi
# The image itself is built every time (the layer cache makes an unchanged tree quick): a tag left by an earlier
# tree must never stand for this one. The classic builder without --platform: the base's arm64 binaries run under
# qemu (with --platform, Debian's Docker 20.10 labels the first step that runs no container with the host's
# platform, and the next COPY fails; its BuildKit looks the base up in a registry).
echo "+ $tag (deploy/Dockerfile on $python)"
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE_IMAGE=$python" -f deploy/Dockerfile -t "$tag" . >/dev/null
# That builder labels the result with the host's platform, though every layer is arm64: say what it is. The
# relabelled copy takes the tag; the build's own image stays behind as the next build's cache.
docker save "$tag" | python3 scripts/image_platform.py linux arm64 | docker load -q >/dev/null
