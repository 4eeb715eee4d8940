"""Peak memory is the workload process's own: a probe started by a large parent (the
harness, natively) must not report the parent's peak, as getrusage's ru_maxrss does (it
carries over fork and exec; a container runtime's child starts from a small parent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from containertax import workloads
from tests.conftest import REPO

PROBE = REPO / "src" / "containertax" / "workloads" / "probe"
CHILD = ("import json, sys; sys.path.insert(0, sys.argv[1]); import probe_common as p; "
         "r = p.max_rss_kib(); r = r if isinstance(r, tuple) else (r, 'ru_maxrss'); "
         "print(json.dumps(r))")  # the old max_rss_kib returned ru_maxrss alone


def child_peak_from_parent(parent_mib: int) -> tuple[int, str]:
    """fork+exec the probe's measurement from a parent that first touched parent_mib MiB."""
    parent = (
        "import subprocess, sys\n"
        f"ballast = bytearray({parent_mib} * 2**20)\n"
        "for i in range(0, len(ballast), 4096): ballast[i] = 1\n"
        "out = subprocess.run([sys.executable, '-c', sys.argv[1], sys.argv[2]],"
        " capture_output=True, text=True, check=True).stdout\n"
        "print(out, end='')\n"
    )
    out = subprocess.run([sys.executable, "-c", parent, CHILD, str(PROBE)],
                         capture_output=True, text=True, check=True).stdout
    kib, source = json.loads(out)
    return kib, source


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_large_parent_does_not_inflate_the_childs_peak():
    big, source = child_peak_from_parent(300)
    small, _ = child_peak_from_parent(1)
    # the child itself is a small Python: tens of MiB, not the parent's 300
    assert big / 1024 < 100, f"child of a 300 MiB parent reports {big / 1024:.0f} MiB"
    assert abs(big - small) / 1024 < 20, (big, small)
    assert source == "VmHWM"


def test_records_name_the_source_and_old_outputs_have_no_rss_metric():
    base = {"t_enter_unix": 1.2, "import_s": 1.0, "copy_bytes": 10**9,
            "copy_s": {"h2d": [0.1], "d2h": [0.1]}, "conv_s": {}}
    new = {x.name: x.value for x in workloads.metrics(
        "microbench", {**base, "max_rss_kib": 2048, "max_rss_source": "VmHWM"}, 1.0, 3.0)}
    assert new["max_rss_mib"] == 2.0
    old = {x.name for x in workloads.metrics("microbench", {**base, "max_rss_kib": 2048},
                                             1.0, 3.0)}
    assert "max_rss_mib" not in old  # ru_maxrss: inherited, not comparable between envs
