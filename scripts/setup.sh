#!/usr/bin/env bash
# Sets up everything the workflow needs on a Debian machine, as root; safe to run again.
# System packages (Python, Docker Engine from Debian's docker.io, Podman with runc (crun, its
# default, refuses hybrid cgroup hosts: runtimes/podman.py) and slirp4netns, Charliecloud,
# debootstrap, TeX Live), a running Docker Engine, the rootless Podman user, the project's
# .venv, the demo image.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
# TeX Live (latexmk, recommended LaTeX and fonts) builds the paper; poppler-utils reads it back
for pkg in python3 python3-venv python3-numpy debootstrap git util-linux \
           latexmk texlive-latex-recommended texlive-fonts-recommended poppler-utils \
           podman uidmap slirp4netns runc charliecloud; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# Docker Engine: Debian's docker.io, unless an engine (e.g. docker-ce) is already there
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  if [ -d /run/systemd/system ]; then
    systemctl start docker
  else
    echo "setup: starting dockerd (no systemd); log in /var/log/containertax-dockerd.log"
    setsid dockerd >/var/log/containertax-dockerd.log 2>&1 < /dev/null &
  fi
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "setup: Docker Engine did not start" >&2; exit 1; }
fi

# Rootless Podman (config/demo-runtimes.yaml, options.rootless: containertax) runs as this
# host user, with subordinate ids for its user namespace (runtimes/podman.py)
if ! id containertax >/dev/null 2>&1; then
  useradd --create-home --shell /usr/sbin/nologin containertax
fi
if ! grep -q '^containertax:' /etc/subuid || ! grep -q '^containertax:' /etc/subgid; then
  usermod --add-subuids 200000-265535 --add-subgids 200000-265535 containertax
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[dev]'

envs/demo-image/build.sh containertax-demo:bookworm
echo "setup: done"
