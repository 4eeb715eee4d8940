"""Issue #35: `mounts: ['/:/host']` in a Docker environment was accepted and the host's
root mounted read-write into the container. Now `check` (config validation) refuses a
mount of / or of a folder holding the campaign's results, naming the key and the reason,
unless the environment says mounts_above_results: true."""

from __future__ import annotations

import pytest
import yaml

from containertax import cli
from tests.conftest import demo_config


def _check(tmp_path, mounts, allow=False):
    cfg = demo_config()
    cfg["environments"]["docker"]["mounts"] = mounts
    if allow:
        cfg["environments"]["docker"]["mounts_above_results"] = True
        # a host folder at another path is a difference to declare (campaign/parity.py)
        cfg["environments"]["docker"]["differences"].update(
            {f"path:{m.split(':')[0]}": "on purpose" for m in mounts})
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return cli.main(["check", str(path), "-d", str(tmp_path)])


@pytest.mark.parametrize("spec,what", [
    ("/:/host", "the host's root"),
    ("/:/host:ro", "the host's root"),
    ("/.:/h:rw", "the host's root"),
    ("{tmp}:/work", "a folder holding the campaign's results"),
    ("{tmp}/results:/r:ro", "a folder holding the campaign's results"),
    ("{tmp}/results/demo:/r", "a folder holding the campaign's results"),
], ids=["root", "root-ro", "root-dot", "workdir", "results", "campaign"])
def test_mounts_above_the_results_are_refused(tmp_path, capsys, spec, what):
    spec = spec.format(tmp=tmp_path)
    assert _check(tmp_path, [spec]) == 1
    err = capsys.readouterr().err
    assert "environments.docker.mounts[0]" in err and what in err, err
    assert "mounts_above_results: true" in err and "Traceback" not in err


def test_narrow_mounts_pass_and_the_key_allows_on_purpose(tmp_path):
    assert _check(tmp_path, ["/usr:/usr:ro", "/etc:/etc:ro",
                             f"{tmp_path}/results/other:{tmp_path}/results/other"]) == 0
    assert _check(tmp_path, ["/:/host:ro"], allow=True) == 0
