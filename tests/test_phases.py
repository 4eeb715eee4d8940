"""The optimisation study's configs: one file laid on another (`base`), Docker variants of a
baseline (`extends`), the phase configs 2A-2D, and picking the best options after 2B."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from containertax import cli
from containertax.campaign import config, optimisation
from containertax.execution import preflight
from containertax.runtimes import docker as docker_kind
from tests.conftest import REPO

PHASES = {
    "phase-2a.yaml": ("dgx-spark-2a", 10, ["chroot", "docker_baseline"], 3, "chroot"),
    "phase-2b.yaml": ("dgx-spark-2b", 5, None, 3, "docker_baseline"),
    "phase-2b-one-at-a-time.yaml": ("dgx-spark-2b", 10, None, 3, "docker_baseline"),
    "phase-2c.yaml": ("dgx-spark-2c", 10, ["chroot", "docker_baseline", "docker_optimised"], 3,
                      "chroot"),
    "phase-2d.yaml": ("dgx-spark", 30, ["chroot", "docker_baseline", "docker_optimised"], 10,
                      "chroot"),
}


@pytest.mark.parametrize("name", sorted(PHASES))
def test_phase_configs_inherit_the_dgx_config(name):
    campaign, reps, envs, n_models, reference = PHASES[name]
    c = config.load_file(REPO / "config" / name)
    dgx = config.load_file(REPO / "config" / "config.yaml")
    assert (c.name, c.repetitions, len(c.models), c.reference) == (campaign, reps, n_models,
                                                                  reference)
    if envs is not None:
        assert [e.id for e in c.environments] == envs
    # the image, model paths and thermal settings are config.yaml's own
    assert {e.image for e in c.environments} == {e.image for e in dgx.environments}
    assert c.model(c.models[0].id).params == dgx.model(c.models[0].id).params
    assert c.thermal == dgx.thermal and c.raw["based_on"] == ["config.yaml"]


def test_phase_2d_is_the_dgx_campaign_itself():
    a = config.load_file(REPO / "config" / "phase-2d.yaml")
    b = config.load_file(REPO / "config" / "config.yaml")
    assert a.config_hash() == b.config_hash() and a.root == b.root


def test_phase_2b_is_the_published_seven_factor_resolution_iv_design():
    """The study's 2B: the 2^(7-3)_IV fraction over seven options of the baseline, 16 rows
    and the baseline with its A/A replica in every block."""
    from containertax.campaign import factorial

    c = config.load_file(REPO / "config" / "phase-2b.yaml")
    design = factorial.design_of(c.raw, c.source)
    assert design.generators == ("E=ABC", "F=BCD", "G=ACD") and design.resolution == 4
    ids = [e.id for e in c.environments]
    assert ids == ["docker_baseline", "docker_baseline_aa", *design.env_ids()]
    assert c.replicas == {"docker_baseline_aa": "docker_baseline"}
    base = c.environment("docker_baseline").spec
    assert c.environment("f01").spec["options"] == base["options"]  # all low: the baseline
    top = c.environment("f16").spec
    assert top["options"]["shm_size"] == "32g" and top["options"]["ipc"] == "private"
    assert top["options"]["ulimits"] == base["options"]["ulimits"]
    assert top["mounts"] == base["mounts"] and top["variant_of"] == "docker_baseline"
    for env in c.environments:  # no row sets a shm size Docker would ignore
        assert preflight.shm_with_host_ipc(c, env.id) == [], env.id


def test_phase_2b_one_at_a_time_varies_one_option_each():
    c = config.load_file(REPO / "config" / "phase-2b-one-at-a-time.yaml")
    base = c.environment("docker_baseline").spec["options"]
    variants = [e for e in c.environments if e.id != "docker_baseline"]
    assert len(variants) == 9
    seen = set()
    for env in variants:
        assert env.spec["variant_of"] == "docker_baseline"
        changed = {k for k in set(base) | set(env.spec["options"])
                   if base.get(k) != env.spec["options"].get(k)}
        assert changed <= set(env.spec["variant"]), env.id
        # one option each; a shm size needs a private IPC namespace (Docker ignores
        # --shm-size with --ipc host), so the shm variants set ipc: private with it
        assert len(env.spec["variant"]) == 1 or env.spec["variant"].keys() == {
            "ipc", "shm_size"} and env.spec["variant"]["ipc"] == "private", env.id
        seen |= set(env.spec["variant"])
        assert env.spec["mounts"] == c.environment("docker_baseline").spec["mounts"]
    assert seen == {"shm_size", "network", "cpuset_cpus", "privileged", "cgroup_parent", "ipc",
                    "memory"}
    ipc_default = c.environment("docker_ipc_default").spec["options"]
    assert "ipc" not in ipc_default and ipc_default["ulimits"] == base["ulimits"]
    # the docker SDK arguments of a variant are the baseline's plus its own option
    kw = docker_kind.docker_kwargs(c.environment("docker_shm_60g").spec["options"])
    assert kw["shm_size"] == "60g" and kw["ipc_mode"] == "private"
    assert docker_kind.docker_kwargs(c.environment("docker_memory_100g").spec["options"])[
        "mem_limit"] == "100g"
    for env in c.environments:  # no variant sets a shm size Docker would ignore
        assert preflight.shm_with_host_ipc(c, env.id) == [], env.id


def test_preflight_warns_of_shm_size_with_host_ipc(tmp_path):
    cfg = _write(tmp_path / "mine.yaml", {
        "base": str(REPO / "config" / "phase-2b-one-at-a-time.yaml"),
        "environments": {"docker_shm_8g": {"options": {"ipc": "host"}}}})
    c = config.load_file(cfg)
    (warning,) = preflight.shm_with_host_ipc(c, "docker_shm_8g")
    assert "environments.docker_shm_8g.options.shm_size (8g) is ignored" in warning
    assert "ipc: private" in warning


def _write(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_base_merges_removes_and_selects_models(tmp_path, config_dict):
    config_dict["environments"]["docker"]["options"] = {"ipc": "host", "shm_size": "1g"}
    _write(tmp_path / "base.yaml", config_dict)
    child = _write(tmp_path / "child.yaml", {
        "base": "base.yaml", "campaign": "child", "thermal": {"cooldown_s": 7},
        "environments": {
            "chroot": None, "native-aa": None,
            "tuned": {"extends": "docker", "options": {"ipc": None, "shm_size": "2g"}}},
        "models": ["n512"]})
    c = config.load_file(child)
    assert [e.id for e in c.environments] == ["native", "docker", "tuned"]
    assert c.thermal["cooldown_s"] == 7 and c.thermal["threshold_c"] == 80  # merged, not replaced
    assert [m.id for m in c.models] == ["n512"]
    tuned = c.environment("tuned").spec
    assert tuned["options"] == {"shm_size": "2g"} and tuned["image"] == config_dict[
        "environments"]["docker"]["image"]
    assert tuned["variant"] == {"ipc": None, "shm_size": "2g"}
    # the resolved config the Snakefile hands its steps loads to the same campaign
    again = config.load_campaign(json.loads(json.dumps(c.raw)), str(child))
    assert again.environment("tuned").spec == tuned and again.config_hash() == c.config_hash()


@pytest.mark.parametrize(("child", "expected"), [
    ({"base": "nowhere.yaml"}, ["key 'base'", "nowhere.yaml"]),
    ({"base": "child.yaml"}, ["inherits from itself"]),
    ({"base": "base.yaml", "models": ["n999"]}, ["models[0]", "'n999' is not a model of",
                                                 "n256"]),
    ({"base": "base.yaml", "environments": {"v": {"extends": "nope"}}},
     ["environments.v.extends", "'nope' is not an environment"]),
    ({"base": "base.yaml", "environments": {"a": {"extends": "b"}, "b": {"extends": "a"}}},
     [".extends': a cycle (a -> b -> a)"]),
])
def test_inheritance_errors_name_the_key(tmp_path, config_dict, child, expected):
    _write(tmp_path / "base.yaml", config_dict)
    path = _write(tmp_path / "child.yaml", {"campaign": "c", **child})
    with pytest.raises(config.ConfigError) as err:
        config.load_file(path)
    for text in expected:
        assert text in str(err.value)


def test_model_ids_need_a_base(config_dict):
    config_dict["models"] = ["n256"]
    with pytest.raises(config.ConfigError, match="only a config with 'base' can select"):
        config.load_campaign(config_dict, "x.yaml")


def _comparisons(rows):
    cols = ["model", "metric", "environment", "reference", "rel_overhead", "p_bh"]
    return pd.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])


def test_best_options_picks_variants_better_everywhere_and_significant_somewhere():
    c = config.load_file(REPO / "config" / "phase-2b-one-at-a-time.yaml")
    rows = []
    effects = {  # environment -> per model (relative throughput difference, BH p)
        "docker_shm_8g": [(0.02, 0.01), (0.01, 0.2), (0.01, 0.3)],
        "docker_shm_32g": [(0.04, 0.001), (0.03, 0.01), (0.02, 0.04)],  # larger: wins shm
        "docker_net_host": [(0.01, 0.02), (0.005, 0.5), (0.002, 0.9)],
        "docker_privileged": [(0.05, 0.001), (-0.01, 0.4), (0.02, 0.1)],  # hurts one model
        "docker_cpuset_perf": [(0.01, 0.3), (0.01, 0.4), (0.01, 0.5)],  # never significant
    }
    for env in (e.id for e in c.environments if e.id != "docker_baseline"):
        for model, (rel, p) in zip([m.id for m in c.models],
                                   effects.get(env, [(0.0, 1.0)] * 3), strict=True):
            rows.append((model, "token_throughput", env, "docker_baseline", rel, p))
    verdicts = optimisation.judge(c, _comparisons(rows), "token_throughput")
    chosen = {v.environment for v in verdicts if v.qualifies}
    assert chosen == {"docker_shm_8g", "docker_shm_32g", "docker_net_host"}
    assert optimisation.combine(verdicts) == {"ipc": "private", "shm_size": "32g",
                                              "network": "host"}
    text = optimisation.render(c, verdicts, "token_throughput")
    assert "docker_optimised:" in text and "extends: docker_baseline" in text
    # lower is better for latency: the same numbers now count against every variant
    lat = _comparisons([(m, "request_latency_s", e, "docker_baseline", r, p)
                        for (m, _, e, _, r, p) in rows])
    assert not any(v.qualifies for v in optimisation.judge(c, lat, "request_latency_s"))


def test_best_options_command(tmp_path, capsys):
    cfg = _write(tmp_path / "mine.yaml", {"base": str(REPO / "config" /
                                                      "phase-2b-one-at-a-time.yaml"),
                                          "results_dir": str(tmp_path / "results"),
                                          "results_dir_absolute": True})
    assert cli.main(["best-options", str(cfg)]) == 1  # no analysis yet: says what to run
    assert "snakemake --cores 1 paper --configfile" in capsys.readouterr().err
    c = config.load_file(cfg)
    stats = c.root / "stats"
    stats.mkdir(parents=True)
    _comparisons([(m.id, "token_throughput", "docker_net_host", "docker_baseline", 0.03, 0.001)
                  for m in c.models]).to_csv(stats / "comparisons.csv", index=False)
    assert cli.main(["best-options", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "yes docker_net_host" in out and "network: host" in out


def test_best_options_writes_docker_optimised_into_the_config(tmp_path, capsys):
    """The optimised environment of phases 2C/2D is best-options' output: --write replaces
    the marked block of config.yaml, which then loads with those options."""
    import shutil

    for name in ("config.yaml", "phase-2c.yaml"):
        shutil.copy(REPO / "config" / name, tmp_path / name)
    # the one-at-a-time alternative: --write fills the block from its verdicts
    shutil.copy(REPO / "config" / "phase-2b-one-at-a-time.yaml", tmp_path / "phase-2b.yaml")
    with (tmp_path / "phase-2b.yaml").open("a") as fh:
        fh.write(f"results_dir: {tmp_path / 'results'}\nresults_dir_absolute: true\n")
    c = config.load_file(tmp_path / "phase-2b.yaml")
    before = config.load_file(tmp_path / "phase-2c.yaml").environment("docker_optimised")
    assert before.spec["options"] == c.environment("docker_baseline").spec["options"]
    stats = c.root / "stats"
    stats.mkdir(parents=True)
    rows = [(m.id, "token_throughput", "docker_net_host", "docker_baseline", 0.03, 0.001)
            for m in c.models]
    _comparisons(rows).to_csv(stats / "comparisons.csv", index=False)
    assert cli.main(["best-options", str(tmp_path / "phase-2b.yaml"), "--write",
                     str(tmp_path / "config.yaml")]) == 0
    text = (tmp_path / "config.yaml").read_text()
    assert "# written " in text and "qualifying: docker_net_host" in text
    after = config.load_file(tmp_path / "phase-2c.yaml").environment("docker_optimised")
    assert after.spec["options"]["network"] == "host"
    assert after.spec["options"]["ipc"] == "host"  # the rest stays the baseline's
    assert cli.main(["best-options", str(tmp_path / "phase-2b.yaml"), "--write",
                     str(tmp_path / "phase-2b.yaml")]) == 1  # no markers there: says so
    assert "no '# BEGIN best-options'" in capsys.readouterr().err


def test_performance_cores_stated_from_the_records(tmp_path):
    """The cores `cpuset_cpus: performance` resolved to on the machine (recorded by the
    Docker launcher) are read with the rest of the records' facts, through the validated
    reader, and become the paper's methods sentence (has-cpuset, cpuset-list)."""
    from containertax.publishing import design_values, facts

    raw = REPO / "results" / "h100" / "raw" / "qwen2-0.5b"
    for env in ("native", "docker"):
        (tmp_path / "raw" / "qwen2-0.5b" / env).mkdir(parents=True)
        (tmp_path / "raw" / "qwen2-0.5b" / env / "rep01.json").write_text(
            (raw / env / "rep01.json").read_text())
    found = facts.from_records(tmp_path)
    assert found["cpusets"] == {}
    assert design_values.cpuset_values(found) == {"has-cpuset": False, "cpuset-list": "--"}
    path = tmp_path / "raw" / "qwen2-0.5b" / "docker" / "rep01.json"
    rec = json.loads(path.read_text())
    rec["environment"]["resolved"]["cpuset"] = {"requested": "performance", "cpus": "0-9",
                                                "source": "cpu_capacity"}
    path.write_text(json.dumps(rec))
    found = facts.from_records(tmp_path)
    assert found["cpusets"] == {"docker": ["0-9 (cpu_capacity)"]}
    values = design_values.cpuset_values(found)
    assert values["has-cpuset"]
    # names are escaped for TeX (an underscore may break the line: texts.tex)
    assert values["cpuset-list"] == "docker on CPUs 0-9 (cpu\\_\\allowbreak{}capacity)"
