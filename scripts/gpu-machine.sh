# Source this on a GPU machine (bash): makes the project importable by the machine's own
# Python (the one with torch), starts a Docker Engine where none runs, and imports the
# image of empty folders that the GPU configs' docker environments use.
#   - .whl/    wheels of what the machine lacks (snakemake and its needs), if carried
#   - .devkit/ a Docker Engine kit (its start-docker.sh), if carried
_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ -d "$_repo/.whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$_repo"/.whl/*.whl
fi
if ! docker info >/dev/null 2>&1 && [ -x "$_repo/.devkit/start-docker.sh" ] \
    && ! [ -S /var/run/docker.sock ]; then
  bash "$_repo/.devkit/start-docker.sh"
fi
export PYTHONPATH="$_repo/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
python3 -m containertax host-image containertax-hostsw:1 >/dev/null
