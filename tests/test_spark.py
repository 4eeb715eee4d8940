"""DGX Spark study (issue #26): telemetry off in every environment, the chroot runs the
image's entrypoint as Docker does, the memory chain (free memory -> KV cache) in the
record, and a Docker memory limit shrinking the stand-in engine's cache. Docker tests run
against the real engine with a locally built image (no registry)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from containertax.campaign import config
from containertax.core import rawrecord
from containertax.execution import environments, memorychain
from containertax.runtimes import chroot as chroot_kind
from containertax.runtimes import launch
from tests.conftest import DEMO_IMAGE, needs_docker

ENTRY_IMAGE = "containertax-entrypoint-test:local"
ENTRYPOINT = """#!/bin/sh
# like NVIDIA's nvidia_entrypoint.sh: sets up the environment, then runs the command
export CT_FROM_ENTRYPOINT=set-by-entrypoint
export LD_LIBRARY_PATH=/opt/entry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
exec "$@"
"""
SHOW = ["python3", "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def _campaign(config_dict, tmp_path, envs):
    config_dict["results_dir"] = str(tmp_path / "results")
    config_dict["results_dir_absolute"] = True
    config_dict["environments"] = envs
    config_dict["reference_environment"] = next(iter(envs))
    return config.load_campaign(config_dict, "test.yaml")


def _launch(tmp_path, argv):
    for d in ("work", "probe"):
        (tmp_path / d).mkdir(exist_ok=True)
    return environments.Launch(argv=argv, probe_dir=tmp_path / "probe",
                               work_dir=tmp_path / "work", timeout_s=60, label="t/c")


def _entry_image(tmp_path: Path) -> str:
    """docker build of a local Dockerfile FROM the demo image, whose ENTRYPOINT exports a
    variable and prepends to LD_LIBRARY_PATH (nothing pulled: the base is local)."""
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "entry.sh").write_text(ENTRYPOINT)
    (ctx / "Dockerfile").write_text(
        f"FROM {DEMO_IMAGE}\nENV LD_LIBRARY_PATH=/opt/image/lib\nCOPY entry.sh /entry.sh\n"
        "RUN chmod 755 /entry.sh\nENTRYPOINT [\"/entry.sh\"]\nCMD [\"sh\"]\n")
    subprocess.run(["docker", "build", "-q", "--pull=false", "-t", ENTRY_IMAGE, str(ctx)],
                   check=True, capture_output=True)
    return ENTRY_IMAGE


def test_telemetry_opt_out_names_match_tensorrt_llm_and_every_launcher_sets_them():
    """The names and values its usage module tests (is_usage_stats_enabled); native and
    the container launchers start from the same project variables."""
    assert launch.TELEMETRY_OPT_OUT == {"TRTLLM_NO_USAGE_STATS": "1",
                                              "TELEMETRY_DISABLED": "1", "DO_NOT_TRACK": "1"}
    for env in (launch.BASE_ENV, launch.PROJECT_ENV):
        assert launch.telemetry_state(env)["off"]
    # planted: a config that turns one back on is recorded as not off
    assert not launch.telemetry_state(
        {**launch.PROJECT_ENV, "DO_NOT_TRACK": "0"})["off"]


def test_native_process_has_the_telemetry_opt_out(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path, {"native": {"kind": "native"}})
    out = environments.launcher(c, "native").run(_launch(
        tmp_path, [sys.executable, *SHOW[1:]]))
    seen = json.loads(out.output.strip().splitlines()[-1])
    assert {k: seen.get(k) for k in launch.TELEMETRY_OPT_OUT} == \
        launch.TELEMETRY_OPT_OUT
    assert out.resolved["telemetry"]["off"]


@needs_docker
@pytest.mark.docker
def test_entrypoint_parity_and_telemetry_in_chroot_and_docker(config_dict, tmp_path):
    """The chroot runs the image's ENTRYPOINT around the process as Docker does: both see
    the variable it exports and its LD_LIBRARY_PATH, and the telemetry opt-out; both
    record Entrypoint and Cmd."""
    image = _entry_image(tmp_path)
    spec = {"image": image, "python": "python3"}
    c = _campaign(config_dict, tmp_path, {"chroot": {"kind": "chroot", **spec},
                                          "docker": {"kind": "docker", **spec}})
    chroot = environments.launcher(c, "chroot")
    facts = chroot_kind.export_rootfs(image, chroot.rootfs())
    assert facts["config"]["entrypoint"] == ["/entry.sh"] and facts["config"]["cmd"] == ["sh"]
    seen = {}
    for name in ("chroot", "docker"):
        out = environments.launcher(c, name).run(_launch(tmp_path, SHOW))
        assert out.returncode == 0, out.output
        seen[name] = json.loads(out.output.strip().splitlines()[-1])
        assert out.resolved["entrypoint"] == ["/entry.sh"]
        assert out.resolved["telemetry"]["off"]
    for env in seen.values():
        assert env["CT_FROM_ENTRYPOINT"] == "set-by-entrypoint"
        assert env["LD_LIBRARY_PATH"] == "/opt/entry/lib:/opt/image/lib"
        assert {k: env.get(k) for k in launch.TELEMETRY_OPT_OUT} == \
            launch.TELEMETRY_OPT_OUT
    seen["docker"].pop("HOSTNAME")
    assert seen["chroot"] == seen["docker"]
    # planted: the chroot without the entrypoint (the behaviour before) misses both
    marker = chroot.rootfs_marker()
    data = json.loads(marker.read_text())
    data["config"]["entrypoint"] = []
    marker.write_text(json.dumps(data))
    bare = json.loads(chroot.run(_launch(tmp_path, SHOW)).output.strip().splitlines()[-1])
    assert "CT_FROM_ENTRYPOINT" not in bare and bare["LD_LIBRARY_PATH"] == "/opt/image/lib"


@needs_docker
@pytest.mark.docker
def test_memory_chain_in_every_environment_and_a_docker_limit_shrinks_the_cache(
        config_dict, tmp_path):
    """The stand-in engine sizes 0.9 x free memory natively, in the chroot and in Docker;
    with --memory 128m the container's cgroup leaves less, and its cache is sized and
    allocated from that (the cap, 160 MiB, is above the limited size, below the others)."""
    demo = {"image": DEMO_IMAGE, "python": "python3"}
    c = _campaign(config_dict, tmp_path, {
        "native": {"kind": "native"}, "chroot": {"kind": "chroot", **demo},
        "docker": {"kind": "docker", **demo},
        "docker_memory": {"kind": "docker", **demo, "options": {"memory": "128m"}},
        "docker_cgroup_parent": {"kind": "docker", **demo,
                                 "options": {"cgroup_parent": "/containertax-test"}}})
    chroot_kind.export_rootfs(DEMO_IMAGE, environments.launcher(c, "chroot").rootfs())
    chains = {e.id: memorychain.run_standin(c, e.id, tmp_path / f"w-{e.id}",
                                            max_alloc_mib=160)["memory_chain"]
              for e in c.environments}
    for env_id, ch in chains.items():
        seen = ch["seen"]
        assert seen["mem_available_bytes"] > 0 and seen["cached_bytes"] is not None, env_id
        assert seen["cgroup"]["version"] in (1, 2) and seen["cgroup"]["current_bytes"], env_id
        assert ch["kv_cache_sized_bytes"] == int(ch["free_bytes"] * 0.9)
    limited = chains["docker_memory"]
    assert limited["seen"]["cgroup"]["max_bytes"] == 128 * 2**20
    assert limited["free_source"] == "cgroup_headroom"
    assert limited["kv_cache_sized_bytes"] < 0.9 * 128 * 2**20
    assert limited["kv_cache_bytes"] == limited["kv_cache_sized_bytes"] < 160 * 2**20
    for other in ("native", "chroot", "docker", "docker_cgroup_parent"):
        assert chains[other]["kv_cache_bytes"] == 160 * 2**20  # the cap: sized far above it
        assert chains[other]["kv_cache_sized_bytes"] > 10 * limited["kv_cache_sized_bytes"]
    # the allocation is in the cgroup's accounting: usage rose by about the cache
    after = limited["after"]["cgroup"]["current_bytes"]
    assert after - limited["seen"]["cgroup"]["current_bytes"] > 0.8 * limited["kv_cache_bytes"]


def test_cgroup_reading_v1_v2_and_a_containers_own_mount(tmp_path):
    """From a fake root: v2 at the process's path; v1 where the path is the host's but the
    container mounts its own cgroup at the root; no limit reads as None."""
    from containertax.workloads import PROBE_DIR

    sys.path.insert(0, str(PROBE_DIR))
    try:
        import memview
    finally:
        sys.path.remove(str(PROBE_DIR))
    v2 = tmp_path / "v2"
    (v2 / "proc/self").mkdir(parents=True)
    (v2 / "proc/self/cgroup").write_text("0::/system.slice/x.scope\n")
    (v2 / "proc/meminfo").write_text("MemTotal: 100 kB\nMemAvailable: 50 kB\nCached: 7 kB\n")
    cg = v2 / "sys/fs/cgroup/system.slice/x.scope"
    cg.mkdir(parents=True)
    for name, value in (("memory.max", "max"), ("memory.current", "4096"),
                        ("memory.peak", "8192"), ("memory.stat", "anon 1\nfile 2\nzz 3\n")):
        (cg / name).write_text(value + "\n")
    view = memview.memory_view(str(v2))
    assert view["mem_available_bytes"] == 50 * 1024 and view["cached_bytes"] == 7 * 1024
    assert view["cgroup"]["max_bytes"] is None and view["cgroup"]["current_bytes"] == 4096
    assert view["cgroup"]["stat"] == {"anon": 1, "file": 2}
    assert memview.free_bytes(view) == (50 * 1024, "mem_available")
    v1 = tmp_path / "v1"
    (v1 / "proc/self").mkdir(parents=True)
    (v1 / "proc/self/cgroup").write_text("4:memory:/docker/abc\n0::/docker/abc\n")
    (v1 / "proc/meminfo").write_text("MemAvailable: 1000 kB\nCached: 1 kB\n")
    own = v1 / "sys/fs/cgroup/memory"  # the container's own, at the mount's root
    own.mkdir(parents=True)
    (own / "memory.limit_in_bytes").write_text("204800\n")
    (own / "memory.usage_in_bytes").write_text("4800\n")
    view = memview.memory_view(str(v1))
    assert view["cgroup"]["version"] == 1 and view["cgroup"]["read_at"] == str(own)
    assert memview.free_bytes(view) == (200000, "cgroup_headroom")


def test_engine_view_reads_tensorrt_llms_sizing_line():
    old = ("[TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): "
           "12.50 GiB, available KV cache memory when calculating max tokens: 90.10 GiB")
    new = ("[TRT-LLM] [I] Peak memory during memory usage profiling (torch + non-torch): "
           "113.65 GiB, available KV cache memory when calculating max tokens: 5.95 GiB, "
           "fraction is set 0.8999999761581421, kv size is 73728. device total memory "
           "119.70 GiB, , tmp kv_mem 0.56 GiB")
    assert memorychain.engine_view([old]) == {"peak_gib": 12.5, "available_kv_gib": 90.1,
                                              "fraction": None, "device_total_gib": None}
    view = memorychain.engine_view(["x", old, new])
    assert view["device_total_gib"] == 119.7 and view["available_kv_gib"] == 5.95
    assert memorychain.engine_view(["nothing"]) is None


def test_a_version_2_record_reads_with_no_memory_chain(tmp_path):
    """Migration: records before version 3 did not measure the chain (null, not a guess);
    the paper's chain table is then empty (not shown)."""
    repo = Path(__file__).resolve().parents[1]  # a campaign of version 2 (later ones are 4)
    src = next((repo / "results" / "h100-engine-balanced").glob("raw/*/*/rep*.json"))
    data = json.loads(src.read_text())
    assert data["schema_version"] in (1, 2)
    path = tmp_path / "rep01.json"
    path.write_text(json.dumps(data))
    rec = rawrecord.read_record(path)
    assert rec.schema_version == rawrecord.SCHEMA_VERSION and rec.memory_chain is None
    assert memorychain.chain_table([rec]) == ""
    # planted: a chain without its required keys is refused, naming the key
    bad = {**rawrecord.migrate(dict(data), "x"), "memory_chain": {"free_bytes": 1}}
    with pytest.raises(rawrecord.RecordError, match="memory_chain"):
        rawrecord.validate(bad, "planted")


def test_mixtral_fp8_on_gb10_is_marked_at_risk_and_others_are_not():
    """Planted: Mixtral FP8 at compute capability 12.1 is at risk with a fallback; the same
    checkpoint on Hopper, a dense FP8 model on GB10 and Mixtral in NVFP4 are not."""
    from containertax.execution import preflight

    mixtral = {"id": "mixtral-8x7b", "architectures": ["MixtralForCausalLM"],
               "checkpoint_quantization": "FP8"}
    dense = {"id": "llama", "architectures": ["LlamaForCausalLM"],
             "checkpoint_quantization": "FP8"}
    nvfp4 = {**mixtral, "id": "mixtral-nvfp4", "checkpoint_quantization": "NVFP4"}
    risky = preflight.at_risk([mixtral, dense, nvfp4], [12, 1])
    assert [r["model"] for r in risky] == ["mixtral-8x7b"]
    assert "PR #11997" in risky[0]["why"] and "NVFP4" in risky[0]["fallback"]
    assert preflight.at_risk([mixtral], [9, 0]) == []
    assert preflight.at_risk([mixtral], None) == []


def test_rehearsal_row_carries_the_risk(tmp_path):
    """A preflight that marked a model at risk: its rehearsal row says so with the fallback,
    even where the row is GO."""
    import yaml

    from containertax.campaign import rehearsal
    from containertax.campaign.config import load_file
    from tests.conftest import REPO

    cfg = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    cfg.update(campaign="r", results_dir=str(tmp_path / "results"), results_dir_absolute=True,
               reference_environment="native",
               environments={"native": {"kind": "native"}})
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    study = load_file(path)
    reh = rehearsal.load_campaign(rehearsal.derive(study), str(path))
    model = study.models[0].id
    (reh.root / "preflight").mkdir(parents=True)
    (reh.root / "preflight" / "native.json").write_text(json.dumps({"at_risk": [
        {"model": model, "why": "FP8 MoE unverified on SM12x", "fallback": "NVFP4"}]}))
    rows = rehearsal.judge(study, reh, reh.root)["rows"]
    row = next(r for r in rows if r["model"] == model)
    assert row["at_risk"] == "FP8 MoE unverified on SM12x; fallback: NVFP4"
    assert "did not run" in row["why"]  # no record: not run, and the risk is on the row


def test_kvstandin_cuda_sizing_needs_torch_and_says_so(tmp_path):
    """--device cuda (sizing as TensorRT-LLM does, from torch.cuda.mem_get_info) in a
    python without PyTorch: exit 2 and one line naming what is missing, no traceback."""
    import importlib.util

    from containertax.workloads import PROBE_DIR

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("this python has PyTorch: tools/gpu/memory_chain.py covers it on a GPU")
    out = subprocess.run([sys.executable, str(PROBE_DIR / "kvstandin.py"), "--out",
                          str(tmp_path / "o.json"), "--device", "cuda"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "needs PyTorch" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "o.json").exists()


def test_committed_h100_memory_chain_says_what_the_docs_say():
    """results/h100-memory-chain (the lent H100, tools/gpu/memory_chain.py): CUDA's free
    memory, and the KV cache sized from it, are the same in every environment, the
    4 GiB Docker limit included; only the host-sized chain shrinks under the limit (the
    README's table and docs/dgx-spark.md state this)."""
    data = json.loads((Path(__file__).parents[1] / "results" / "h100-memory-chain" / "raw"
                       / "memory-chain.json").read_text())
    rows = {(r["environment"], r["device"]): r for r in data["rows"]}
    assert not any("error" in r for r in rows.values())
    cuda = {env: r["kv_sized_gib"] for (env, dev), r in rows.items() if dev == "cuda"}
    assert len(cuda) == 4 and len(set(cuda.values())) == 1
    limited = rows[("docker_memory", "host")]
    assert limited["free_source"] == "cgroup_headroom" and limited["cgroup_max_gib"] == 4.0
    assert limited["kv_sized_gib"] < 4 < rows[("docker", "host")]["kv_sized_gib"] / 10
