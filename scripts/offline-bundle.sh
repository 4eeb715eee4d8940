#!/usr/bin/env bash
# Wheels for a node without network (air-gapped GPU nodes of a cluster):
#   scripts/offline-bundle.sh build DIR [PYTHON_VERSION [PLATFORMS]]  # on a machine with network
#   scripts/offline-bundle.sh install DIR [TARGET]                    # on the node
# build: wheels of the project (with the slurm extra) and of every dependency into DIR/wheels.
#   Resolved here with pip; each platform-specific wheel is then fetched again for the
#   node's Python (e.g. 3.12) and platforms (comma-separated, newest first, e.g.
#   manylinux_2_28_aarch64,manylinux2014_aarch64 for a DGX Spark), when these differ from
#   this machine's; pure-Python wheels (and sdists built here) serve any node.
# install: pip install --no-index from DIR/wheels, into TARGET (a folder on PYTHONPATH, as
#   scripts/gpu-machine.sh uses /tmp/site) or, without TARGET, into the running python3.
# The Docker Engine for a node without one: ../shared/device/make-docker-kit.sh (a static
# engine kit; scripts/gpu-machine.sh starts it), not Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd=${1:?usage: offline-bundle.sh build|install DIR ...} dir=${2:?DIR}
py=${PYTHON:-python3}
case "$cmd" in
build)
  version=${3:-$($py -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')}
  platform=${4:-}
  mkdir -p "$dir/wheels"
  "$py" -m pip wheel -q -w "$dir/wheels" ".[slurm]"
  if [ -n "$platform" ] || [ "$version" != "$($py -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')" ]; then
    for whl in "$dir"/wheels/*.whl; do
      case "$whl" in *-none-any.whl) continue ;; esac
      name=$(basename "$whl" | cut -d- -f1) ver=$(basename "$whl" | cut -d- -f2)
      plats=()
      for p in ${platform//,/ }; do plats+=(--platform "$p"); done
      "$py" -m pip download -q --no-deps --only-binary=:all: -d "$dir/wheels" \
        --python-version "$version" "${plats[@]}" "$name==$ver"
      rm "$whl"
    done
  fi
  printf 'python %s\nplatform %s\n' "$version" "${platform:-$($py -c 'import sysconfig; print(sysconfig.get_platform())')}" \
    > "$dir/TARGET"
  echo "offline-bundle: $(ls "$dir/wheels" | wc -l) wheels in $dir/wheels for $(tr '\n' ' ' < "$dir/TARGET")"
  ;;
install)
  target=${3:-}
  "$py" -m pip install -q --no-index --find-links "$dir/wheels" ${target:+--target "$target"} \
    "containertax[slurm]"
  echo "offline-bundle: installed containertax and its dependencies${target:+ into $target}"
  ;;
*) echo "offline-bundle.sh: unknown command $cmd (build or install)" >&2; exit 2 ;;
esac
