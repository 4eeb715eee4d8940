#!/usr/bin/env bash
# An offline bundle for a node without network (air-gapped GPU nodes of a cluster): the
# project's wheels for the node's Python and platform and, where the node has none, the
# Docker Engine; tools/offline_bundle.py does the work and documents it.
#   scripts/offline-bundle.sh build DIR [PYTHON_VERSION [PLATFORMS]] [--docker none|static|debian]
#                                       [--requirements FILE] [--have FILE]   # with network
#                                       [--not-needed FILE] [--xz-preset 0-9]
#   scripts/offline-bundle.sh install DIR [TARGET] [--no-docker]              # on the node
#   scripts/offline-bundle.sh verify DIR                                      # sha256 of every file
# PYTHON=... names the interpreter (default python3): on the node, the one to install for.
# scripts/gpu-machine.sh installs .bundle/ (make it with scripts/gpu-bundle.sh).
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "$0")/../tools/offline_bundle.py" "$@"
