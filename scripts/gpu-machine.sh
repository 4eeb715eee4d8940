# Source this on a GPU machine (bash): makes the project importable by the machine's own
# Python (the one with torch), installs what it lacks and starts a Docker Engine where none
# answers, from the offline bundle .bundle/ if carried, and imports the image of empty
# folders that the GPU configs' docker environments use.
#   .bundle/  made here by scripts/gpu-bundle.sh (git-ignored, about 44 MiB): installed with
#             scripts/offline-bundle.sh install .bundle /tmp/site (sha256 of every file checked)
# CONTAINERTAX_NO_DOCKER=1 leaves Docker alone (for runs without a docker environment).
_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -d "$_repo/.bundle" ]; then
  PYTHON=python3 bash "$_repo/scripts/offline-bundle.sh" install "$_repo/.bundle" /tmp/site \
    ${CONTAINERTAX_NO_DOCKER:+--no-docker}
elif [ -d "$_repo/.whl" ] || [ -d "$_repo/.devkit" ]; then
  echo "gpu-machine.sh: .whl/ and .devkit/ are replaced by one bundle: run scripts/gpu-bundle.sh" \
    "and carry .bundle instead" >&2
  false
fi
export PYTHONPATH="$_repo/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${CONTAINERTAX_NO_DOCKER:-}" ]; then
  python3 -m containertax host-image containertax-hostsw:1 >/dev/null
fi
