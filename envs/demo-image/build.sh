#!/usr/bin/env bash
# Builds the demo image without any container registry: debootstrap a minimal Debian
# (bookworm) with python3 and python3-numpy from Debian's archive, then `docker import`.
# The demo's chroot and docker environments both run this root filesystem.
# Usage: envs/demo-image/build.sh [IMAGE_TAG] [MIRROR]
set -euo pipefail
tag=${1:-containertax-demo:bookworm}
mirror=${2:-http://deb.debian.org/debian}
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "image $tag exists: $(docker image inspect -f '{{.Id}}' "$tag")"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3,python3-numpy bookworm "$work/root" "$mirror" \
  > "$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
tar -C "$work/root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --message "containertax demo: debootstrap bookworm minbase + python3-numpy" - "$tag"
echo "built $tag: $(docker image inspect -f '{{.Id}}' "$tag")"
