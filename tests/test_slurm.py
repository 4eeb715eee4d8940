"""Two lanes of the CPU demo through the SLURM executor (snakemake-executor-plugin-slurm
with profiles/slurm), on a real single-node SLURM cluster from Debian's packages
(slurmctld, slurmd, munge) started in the test's own folder on free ports, and shut down
after. scripts/test.sh installs SLURM and the plugin and sets CONTAINERTAX_REQUIRE_SLURM,
so CI fails rather than skips when either is missing."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, needs_docker, run_exclusive
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


def munge_works(socket_path: Path) -> bool:
    enc = subprocess.run(["munge", "-S", str(socket_path), "-n"], capture_output=True)
    return enc.returncode == 0 and subprocess.run(
        ["unmunge", "-S", str(socket_path)], input=enc.stdout,
        capture_output=True).returncode == 0


MUNGE_SOCKET = Path("/run/munge/munge.socket.2")  # where SLURM's daemons look for it


@contextlib.contextmanager
def munged() -> Iterator[Path]:
    """A munged on the default socket: the one already running, or one of the test's own.
    A configless slurmd has no slurm.conf to name another socket, so the default it must be.
    Debian's systemd unit makes /run/munge as its runtime folder; a machine without
    systemd, or a fresh one, has none, and no key may be there: the test makes the folder
    (and removes it after), keeps its key, pid, seed and log in a folder of its own, and
    needs nothing a machine kept from earlier work."""
    if munge_works(MUNGE_SOCKET):
        yield MUNGE_SOCKET
        return
    run_dir = MUNGE_SOCKET.parent
    made_run_dir = not run_dir.exists()
    run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="containertax-munge-"))
    key, log = d / "munge.key", d / "munged.log"
    proc = None
    try:
        subprocess.run(["mungekey", "--create", f"--keyfile={key}"], check=True,
                       capture_output=True)
        proc = subprocess.Popen(
            ["munged", "--foreground", "--force", f"--socket={MUNGE_SOCKET}",
             f"--key-file={key}", f"--log-file={log}", f"--pid-file={d / 'munged.pid'}",
             f"--seed-file={d / 'munged.seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        for _ in range(50):
            if munge_works(MUNGE_SOCKET):
                break
            time.sleep(0.2)
        else:
            text = log.read_text()[-2000:] if log.exists() else "(no log)"
            pytest.fail(f"the test's munged did not answer on {MUNGE_SOCKET}:\n{text}")
        yield MUNGE_SOCKET
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(d, ignore_errors=True)
        if made_run_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


@pytest.fixture
def slurm_cluster(tmp_path, tmp_path_factory):
    """munged, slurmctld and slurmd on this host, their config, state and logs of the
    test's own (nothing a machine keeps from earlier work is needed: see munged); one
    cluster at a time across pytest-xdist workers (the default munge socket is shared)."""
    with run_exclusive(tmp_path_factory, "slurm"), munged():
        yield from _slurm_cluster(tmp_path)


def _slurm_cluster(tmp_path: Path) -> Iterator[dict[str, str]]:
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
