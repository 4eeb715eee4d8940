#!/usr/bin/env bash
# Set-up for the DGX Spark study on DGX OS (Ubuntu 24.04 on aarch64), as root; safe to run
# again. Installs only what the Spark study needs: no SLURM, no Chromium, no rootless Podman,
# no Charliecloud (scripts/setup.sh and scripts/test.sh are for the development machine).
#
# Written from Ubuntu 24.04's package names and NVIDIA's DGX Spark playbooks
# (github.com/NVIDIA/dgx-spark-playbooks, nvidia/trt-llm/README.md); it has NOT been run on
# DGX OS or any Spark here: this project has no such machine.
#
#   sudo scripts/setup-spark.sh [CONFIG]     # CONFIG: default config/study-spark.yaml
#
# Then: `.venv/bin/containertax doctor CONFIG` names whatever is still missing (it is the
# last step below), each with the command that fixes it.
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-config/study-spark.yaml}"

if [ "$(id -u)" -ne 0 ]; then
  echo "setup-spark: run as root (sudo $0): the chroot and the page-cache drop need it" >&2
  exit 1
fi

# Ubuntu 24.04 (noble) names, the same on arm64: python3-venv for .venv (PEP 668 refuses a
# system-wide pip), util-linux for unshare and prlimit (the chroot), TeX Live and poppler for
# the paper
need=()
for pkg in python3 python3-venv git util-linux latexmk texlive-latex-recommended \
           texlive-fonts-recommended poppler-utils; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-spark: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# DGX OS ships Docker and the NVIDIA Container Toolkit: check, do not install over them
if ! command -v docker >/dev/null 2>&1; then
  echo "setup-spark: no docker command. DGX OS ships Docker Engine; on plain Ubuntu: " \
       "apt-get install docker.io" >&2
  exit 1
fi
if ! docker info >/dev/null 2>&1; then
  systemctl enable --now docker
fi
if ! docker info --format '{{json .Runtimes}}' | grep -q nvidia; then
  echo "setup-spark: Docker has no nvidia runtime. Fix: apt-get install -y" \
       "nvidia-container-toolkit && nvidia-ctk runtime configure --runtime=docker &&" \
       "systemctl restart docker" >&2
fi

# the project and Hugging Face's CLI (hf) in .venv: nothing pip-installed system-wide
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e . 'huggingface_hub>=1.0'

# the folders every environment binds at the same path (config/config.yaml mounts)
mkdir -p /models /datasets

echo "setup-spark: done. The readiness check (each failing row names its fix):"
.venv/bin/containertax doctor "$config" || {
  echo "setup-spark: fix the rows marked FAIL above, then run" \
       ".venv/bin/containertax doctor $config again" >&2
  exit 1
}
