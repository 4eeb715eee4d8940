"""Two lanes of the CPU demo through the SLURM executor (snakemake-executor-plugin-slurm
with profiles/slurm), on a real single-node SLURM cluster from Debian's packages
(slurmctld, slurmd, munge) started in the test's own folder on free ports, and shut down
after. scripts/test.sh installs SLURM and the plugin and sets CONTAINERTAX_REQUIRE_SLURM,
so CI fails rather than skips when either is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, needs_docker
from tests.test_lanes_workflow import check_lanes, lane_column, slow_gates
from tests.test_workflow import make_campaign, raw_records

pytestmark = [needs_docker, pytest.mark.docker, pytest.mark.slow]

MISSING = [tool for tool in ("slurmctld", "slurmd", "munged", "sbatch", "squeue")
           if shutil.which(tool) is None]
if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
    MISSING.append("snakemake-executor-plugin-slurm (pip install '.[slurm]')")
if MISSING and os.environ.get("CONTAINERTAX_REQUIRE_SLURM"):
    raise RuntimeError(f"CONTAINERTAX_REQUIRE_SLURM is set but {MISSING} are missing")
pytestmark.append(pytest.mark.skipif(bool(MISSING), reason=f"needs {MISSING}"))

SLURM_CONF = """\
ClusterName=containertax
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
SlurmctldParameters=enable_configless
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
MpiDefault=none
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=lanes Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def munge_works() -> bool:
    enc = subprocess.run(["munge", "-n"], capture_output=True)
    return enc.returncode == 0 and subprocess.run(
        ["unmunge"], input=enc.stdout, capture_output=True).returncode == 0


@pytest.fixture
def slurm_cluster(tmp_path):
    """slurmctld and slurmd on this host, their config, state and logs under tmp_path."""
    d = tmp_path / "slurm"
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir(parents=True)
    host = socket.gethostname().split(".")[0]
    mem_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 1024 // 2
    conf = d / "slurm.conf"
    ctld_port = free_port()
    conf.write_text(SLURM_CONF.format(host=host, d=d, ctld_port=ctld_port, d_port=free_port(),
                                      cpus=os.cpu_count(), mem_mb=mem_mb))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    started: list[int] = []
    if not munge_works():
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True)
        munged = subprocess.Popen(["munged", "--force", "--foreground"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started.append(munged.pid)
        for _ in range(50):
            if munge_works():
                break
            time.sleep(0.2)
    ctld = subprocess.Popen(["slurmctld", "-D", "-c", "-f", str(conf)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    time.sleep(1)
    # configless, as many clusters run: slurmd fetches the config from slurmctld and caches
    # it where commands on the node find it (/run/slurm/conf), since the jobstep plugin's
    # nested srun runs without SLURM_CONF
    slurmd = subprocess.Popen(["slurmd", "-D", "-c", "--conf-server", f"127.0.0.1:{ctld_port}"],
                              env={k: v for k, v in env.items() if k != "SLURM_CONF"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(60):
            info = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True,
                                  text=True)
            if info.stdout.strip() in ("idle", "mixed"):
                break
            time.sleep(1)
        else:
            logs = "\n".join(p.read_text()[-2000:] for p in (d / "log").glob("*.log"))
            pytest.fail(f"the SLURM node did not come up: {info.stdout} {info.stderr}\n{logs}")
        yield env
    finally:
        subprocess.run(["scontrol", "shutdown"], env=env, capture_output=True, timeout=30)
        for proc in (slurmd, ctld):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in started:
            os.kill(pid, 15)
        cache = Path("/run/slurm/conf")
        if cache.is_symlink() and str(d) in os.readlink(cache):
            cache.unlink()


def test_two_lanes_through_slurm(tmp_path, slurm_cluster):
    host = socket.gethostname().split(".")[0]
    lanes = [{"id": "a", "gpu": 0, "host": host}, {"id": "b", "gpu": 1, "host": host}]
    cfg = make_campaign(tmp_path, "slurm", ["native", "docker"], reps=2, lanes=lanes)
    slow_gates(cfg)
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "cells", "--workflow-profile",
         str(REPO / "profiles" / "slurm"), "--slurm-no-account",
         "--default-resources", "mem_mb=200", "runtime=30", "cpus_per_task=1",
         "--snakefile", str(REPO / "Snakefile"), "--directory", str(tmp_path),
         "--configfile", str(cfg)],
        capture_output=True, text=True, timeout=900, env=slurm_cluster)
    wall = time.monotonic() - t0
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    root = tmp_path / "results" / "slurm"
    check_lanes(root, ["a", "b"])
    recs = [json.loads(p.read_text()) for p in raw_records(root)]
    assert len(recs) == 4 and {r["lane"]["id"] for r in recs} == {"a", "b"}
    # every run was a SLURM job of its own
    jobs = [r["lane"]["slurm_job_id"] for r in recs]
    assert all(jobs) and len(set(jobs)) == 4, jobs
    assert {pos for pos, _ in lane_column(root)} == {0, 1, 2, 3}
    print(f"SLURM campaign: 4 cells, 12 jobs, {wall:.0f} s")
