"""Every malformed config a hostile user tried (issue #16, failure 9) and more: each must
exit 1 from `containertax check`, naming the file and the key, with no traceback, in
seconds. Fast: no Docker, no Snakemake (one slow test runs a few through Snakemake)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from containertax import cli
from tests.conftest import REPO, demo_config

DEMO_TEXT = (REPO / "config" / "demo.yaml").read_text()

Mutation = Callable[[dict[str, Any], Path], None]


def setter(path: str, value: Any) -> Mutation:
    """Set a dotted key (list indices as numbers) of the demo config."""
    def mutate(cfg: dict[str, Any], _: Path) -> None:
        *parents, last = path.split(".")
        node: Any = cfg
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return mutate


def deleter(key: str) -> Mutation:
    return lambda cfg, _: cfg.pop(key)


def with_base(base: str) -> Mutation:
    def mutate(cfg: dict[str, Any], tmp: Path) -> None:
        cfg.clear()
        cfg.update({"base": base, "campaign": "child"})
    return mutate


def base_dir(cfg: dict[str, Any], tmp: Path) -> None:
    (tmp / "folder.yaml").mkdir()
    with_base("folder.yaml")(cfg, tmp)


def base_not_config(cfg: dict[str, Any], tmp: Path) -> None:
    (tmp / "profile.yaml").write_text("cores: 1\nkeep-going: true\n")
    with_base("profile.yaml")(cfg, tmp)


def base_self(cfg: dict[str, Any], tmp: Path) -> None:
    cfg["base"] = "case.yaml"


def extends_cycle(cfg: dict[str, Any], _: Path) -> None:
    cfg["environments"]["docker"]["extends"] = "chroot"
    cfg["environments"]["chroot"]["extends"] = "docker"


def other_campaigns_records(cfg: dict[str, Any], tmp: Path) -> None:
    rec = tmp / "results" / "demo" / "raw" / "n256" / "native" / "rep01.json"
    rec.parent.mkdir(parents=True)
    rec.write_text(json.dumps({"provenance": {"config_source": "config/other.yaml"}}))


def duplicate_model(cfg: dict[str, Any], _: Path) -> None:
    cfg["models"].append(copy.deepcopy(cfg["models"][0]))


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))

# (case id, YAML text or a mutation of the demo config, what the message must name)
TEXT_CASES: list[tuple[str, str | bytes, str]] = [
    ("empty-file", "", "empty"),
    ("only-comments", "# a config, one day\n", "empty"),
    ("top-level-list", "- campaign: x\n- repetitions: 3\n", "list"),
    ("top-level-scalar", "demo\n", "str"),
    ("yaml-syntax", "campaign: [demo\nrepetitions: 3\n", "line 2"),
    ("tab-indent", "campaign: demo\nthermal:\n\tsensor: none\n", "line 3"),
    ("duplicate-top-key", DEMO_TEXT + "repetitions: 5\n", "'repetitions' is given twice"),
    ("duplicate-nested-key",
     DEMO_TEXT.replace("  threshold_c: 80\n", "  threshold_c: 80\n  threshold_c: 60\n"),
     "'threshold_c' is given twice"),
    ("alias-bomb", ALIAS_BOMB, "aliases (*name) expand"),
    ("not-text", b"\xff\xfe\x00binary\x00", "not a text file"),
    ("unknown-top-key", DEMO_TEXT + "repetition: 5\n", "repetition"),
]
MUTATION_CASES: list[tuple[str, Mutation, str]] = [
    ("repetitions-huge", setter("repetitions", 1_000_000_000), "repetitions"),
    ("repetitions-one", setter("repetitions", 1), "repetitions"),
    ("repetitions-text", setter("repetitions", "four"), "repetitions"),
    ("campaign-missing", deleter("campaign"), "campaign"),
    ("campaign-300-chars", setter("campaign", "c" * 300), "campaign"),
    ("campaign-path", setter("campaign", "../evil"), "campaign"),
    ("model-id-300-chars", setter("models.0.id", "m" * 300), "models[0].id"),
    ("model-id-slash", setter("models.0.id", "a/b"), "models[0].id"),
    ("models-mapping", setter("models", {"n256": {"size": 256}}), "models"),
    ("models-empty", setter("models", []), "models"),
    ("models-ids-without-base", setter("models", ["n256"]), "models[0]"),
    ("models-duplicate-id", duplicate_model, "models"),
    ("model-timeout-zero", setter("models.0.timeout_s", 0), "models[0].timeout_s"),
    ("model-unknown-key", setter("models.0.timeout", 30), "models[0]"),
    ("model-other-level-key", setter("models.0.repetitions", 3), "models[0]"),
    ("model-size-negative", setter("models.1.size", -5), "models[1].size"),
    ("environments-list", setter("environments", ["native"]), "environments"),
    ("environment-kind", setter("environments.native.kind", "vm"), "environments.native.kind"),
    ("environment-id-300-chars", setter("environments", {"e" * 300: {"kind": "native"}}),
     "environments"),
    ("docker-without-image", lambda c, _: c["environments"]["docker"].pop("image"),
     "environments.docker.image"),
    ("ulimit-not-a-number", setter("environments.docker.options.ulimits.stack", "lots"),
     "ulimits.stack"),
    # every Docker option value by type and pattern (issue #21): nothing odd reaches Docker
    ("docker-cgroup-parent-injection",
     setter("environments.docker.options.cgroup_parent", "$(touch /tmp/ct-injected)"),
     "environments.docker.options.cgroup_parent"),
    ("docker-cgroup-parent-parent", setter("environments.docker.options.cgroup_parent",
                                           "/a/../../etc"),
     "environments.docker.options.cgroup_parent"),
    ("docker-shm-size-text", setter("environments.docker.options.shm_size", "lots"),
     "environments.docker.options.shm_size"),
    ("docker-memory-negative", setter("environments.docker.options.memory", "-1g"),
     "environments.docker.options.memory"),
    ("docker-cpuset-not-a-list", setter("environments.docker.options.cpuset_cpus",
                                        "0-3; reboot"),
     "environments.docker.options.cpuset_cpus"),
    ("docker-ipc-unknown", setter("environments.docker.options.ipc", "hostile"),
     "environments.docker.options.ipc"),
    ("docker-network-unknown", setter("environments.docker.options.network", "internet"),
     "environments.docker.options.network"),
    ("docker-ulimit-unknown-name", setter("environments.docker.options.ulimits",
                                          {"stacks": 1}),
     "environments.docker.options.ulimits"),
    ("docker-ulimit-below-unlimited", setter("environments.docker.options.ulimits.stack", -5),
     "environments.docker.options.ulimits.stack"),
    ("docker-device-relative", setter("environments.docker.options.devices", ["dev/fuse"]),
     "environments.docker.options.devices[0]"),
    ("docker-device-bad-perms", setter("environments.docker.options.devices",
                                       ["/dev/fuse:/dev/fuse:rwx"]),
     "environments.docker.options.devices[0]"),
    ("docker-gpus-word", setter("environments.docker.options.gpus", "some"),
     "environments.docker.options.gpus"),
    ("docker-gpus-zero", setter("environments.docker.options.gpus", 0),
     "environments.docker.options.gpus"),
    ("docker-runtime-with-flag", setter("environments.docker.options.runtime",
                                        "nvidia --privileged"),
     "environments.docker.options.runtime"),
    ("docker-user-injection", setter("environments.docker.options.user", "root;id"),
     "environments.docker.options.user"),
    ("docker-privileged-text", setter("environments.docker.options.privileged", "yes"),
     "environments.docker.options.privileged"),
    ("docker-option-on-native", setter("environments.native.options", {"ipc": "host"}),
     "environments.native.options"),
    ("extends-cycle", extends_cycle, "extends"),
    ("mount-target-escapes", setter("environments.chroot.mounts", ["/tmp:/../../etc/x"]),
     "environments.chroot.mounts[0]"),
    ("mount-target-relative", setter("environments.docker.mounts", ["/tmp:data"]),
     "environments.docker.mounts[0]"),
    ("reference-unknown", setter("reference_environment", "vm"), "reference_environment"),
    ("workload-kind", setter("workload.kind", "bogus"), "workload.kind"),
    ("workload-timeout-negative", setter("workload.timeout_s", -1), "workload.timeout_s"),
    ("workload-timeout-huge", setter("workload.timeout_s", 10**9), "workload.timeout_s"),
    # every workload value against its kind's closed set (issue #21)
    ("workload-dtype-unknown", setter("workload.dtype", "float999"), "workload.dtype"),
    ("workload-dtype-not-text", setter("workload.dtype", 64), "workload.dtype"),
    ("workload-backend-unknown", setter("workload.backend", "jax"), "workload.backend"),
    ("workload-device-unknown", setter("workload.device", "tpu"), "workload.device"),
    ("model-dtype-unknown", setter("models.0.dtype", "float999"), "models[0].dtype"),
    ("threshold-minus-300", setter("thermal.threshold_c", -300), "thermal.threshold_c"),
    ("threshold-1000", setter("thermal.threshold_c", 1000), "thermal.threshold_c"),
    ("thermal-timeout-huge", setter("thermal.timeout_s", 1e12), "thermal.timeout_s"),
    ("thermal-poll-zero", setter("thermal.poll_s", 0), "thermal.poll_s"),
    ("thermal-timeout-below-poll", setter("thermal.timeout_s", 0.1), "thermal.timeout_s"),
    ("telemetry-hz", setter("telemetry.hz", 1000), "telemetry.hz"),
    ("schedule-design", setter("schedule.design", "latin"), "schedule.design"),
    ("page-cache-setting", setter("memory", {"drop_page_cache": "always"}),
     "memory.drop_page_cache"),
    ("alpha-above-one", setter("analysis.alpha", 2), "analysis.alpha"),
    ("metric-unknown", setter("analysis.metrics", ["bogus"]), "analysis.metrics"),
    ("headline-unknown", setter("analysis.headline_metric", "bogus"),
     "analysis.headline_metric"),
    ("headline-not-analysed", setter("analysis.headline_metric", "import_s"),
     "analysis.headline_metric"),
    ("results-dir-injection", setter("results_dir", "$(touch /tmp/ct-injected)"),
     "results_dir"),
    ("results-dir-space", setter("results_dir", "my results"), "results_dir"),
    ("results-dir-parent", setter("results_dir", "../.."), "results_dir"),
    ("results-dir-absolute", setter("results_dir", "/tmp/elsewhere"), "results_dir"),
    ("base-missing", with_base("nowhere.yaml"), "base"),
    ("base-directory", base_dir, "base"),
    ("base-not-a-config", base_not_config, "base"),
    ("base-itself", base_self, "base"),
    ("base-not-a-path", with_base(42), "base"),  # type: ignore[arg-type]
    ("campaign-of-another-config", other_campaigns_records, "campaign"),
]


def write_case(tmp_path: Path, case: str | bytes | Mutation) -> Path:
    path = tmp_path / "case.yaml"
    if isinstance(case, bytes):
        path.write_bytes(case)
    elif isinstance(case, str):
        path.write_text(case)
    else:
        cfg = demo_config()
        case(cfg, tmp_path)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.parametrize("case,key", [c[1:] for c in TEXT_CASES + MUTATION_CASES],
                         ids=[c[0] for c in TEXT_CASES + MUTATION_CASES])
def test_malformed_config_is_a_clear_error(tmp_path, monkeypatch, capsys, case, key):
    monkeypatch.chdir(tmp_path)  # results_dir is relative to the working directory
    path = write_case(tmp_path, case)
    code = cli.main(["check", str(path)])
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 1, text
    assert "Traceback" not in text
    assert "case.yaml" in text, text  # the file (the one named, or the base it names)
    assert key in text, text
    assert not Path("/tmp/ct-injected").exists()


def test_the_sweep_is_broad():
    assert len(TEXT_CASES) + len(MUTATION_CASES) >= 40


def test_every_shipped_config_passes(capsys):
    """Every shipped config passes, but those whose docker_optimised is derived from phase
    2B (config.yaml, phase-2c, phase-2d): check refuses them, naming the fix, until 2B's
    analysis has derived the options (results/dgx-spark-2b is not committed)."""
    derived = {"config.yaml", "phase-2c.yaml", "phase-2d.yaml"}
    for path in sorted((REPO / "config").glob("*.yaml")):
        code = cli.main(["check", str(path)])
        err = capsys.readouterr().err
        if path.name in derived or path.name == "study-spark.yaml":  # names 2C and 2D
            assert code == 1 and "--derive docker_optimised" in err, (path, err)
        else:
            assert code == 0, (path, err)


def test_the_demo_passes_and_the_check_says_what_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["check", str(write_case(tmp_path, DEMO_TEXT))]) == 0
    # 2 models x 4 environments (the A/A replica native-aa included) x 4 repetitions
    assert "32 cells (2 models x 4 environments x 4 repetitions)" in capsys.readouterr().out


def test_extends_campaign_lets_a_config_add_to_another_configs_campaign(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = demo_config()
    other_campaigns_records(cfg, tmp_path)
    cfg["extends_campaign"] = True
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert cli.main(["check", str(path)]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("case,key", [
    (DEMO_TEXT + "repetitions: 5\n", "'repetitions' is given twice"),
    (DEMO_TEXT + "results_dir: '$(touch /tmp/ct-injected)'\n", "results_dir"),
    (DEMO_TEXT.replace("size: 512", "size: 512\n    timeout: 3"), "models[1]"),
], ids=["duplicate-key", "results-dir-injection", "model-unknown-key"])
def test_snakemake_refuses_them_too_and_writes_nothing(tmp_path, case, key):
    """Straight to Snakemake (no check first): the same message, nothing written, even
    in a dry run."""
    path = write_case(tmp_path, case)
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path), "--configfile", str(path)],
        capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and key in text and "Traceback" not in text, text[-3000:]
    assert not (tmp_path / "results").exists()
    assert not Path("/tmp/ct-injected").exists()


def _checkout_with_records_of_another_config(tmp_path: Path) -> tuple[Path, Path]:
    """A checkout (its Snakefile marks the root) whose results/demo holds records of
    config/other.yaml, and a config that reuses the name demo; and a folder elsewhere."""
    root = tmp_path / "checkout"
    (root / "config").mkdir(parents=True)
    (root / "Snakefile").write_text("# the checkout's root\n")
    other_campaigns_records(demo_config(), root)
    path = root / "config" / "case.yaml"
    path.write_text(DEMO_TEXT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return path, elsewhere


def test_check_from_another_directory_resolves_paths_as_snakemake_does(tmp_path, monkeypatch,
                                                                        capsys):
    """Issue #21: check run outside the checkout resolved results_dir against its own
    directory, found no records there and said ok to a config Snakemake (run in the
    checkout) refuses. It now resolves against the checkout holding the config."""
    path, elsewhere = _checkout_with_records_of_another_config(tmp_path)
    monkeypatch.chdir(elsewhere)
    code = cli.main(["check", str(path)])
    text = "".join(capsys.readouterr())
    assert code == 1 and "Traceback" not in text, text
    assert "key 'campaign'" in text and "config/other.yaml" in text and str(path) in text, text
    # from the checkout itself: the same refusal (the rule gives the same folder)
    monkeypatch.chdir(path.parents[1])
    assert cli.main(["check", str(path)]) == 1
    # --directory names Snakemake's working directory, as snakemake --directory does
    assert cli.main(["check", str(path), "--directory", str(elsewhere)]) == 0
    assert f"results in {elsewhere}/results/demo" in capsys.readouterr().out
    assert cli.main(["check", str(path), "--directory", str(tmp_path / "nowhere")]) == 1
    assert "--directory" in capsys.readouterr().err


def test_project_root_rule(tmp_path, monkeypatch):
    """--directory, else the checkout above the config, else the current directory ('.'
    when it is the current directory, so that paths and messages stay relative)."""
    from containertax.campaign import paths

    demo = REPO / "config" / "demo.yaml"
    monkeypatch.chdir(tmp_path)
    assert paths.project_root(demo) == REPO.resolve()
    assert paths.project_root(demo, REPO / "tests") == (REPO / "tests").resolve()
    assert paths.project_root(tmp_path / "loose.yaml") == Path(".")  # no checkout above
    monkeypatch.chdir(REPO)
    assert paths.project_root(demo) == Path(".")


@pytest.mark.slow
def test_snakemake_in_the_checkout_refuses_what_check_refuses_from_elsewhere(tmp_path):
    path, _ = _checkout_with_records_of_another_config(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(path.parents[1]), "--configfile", str(path)],
        capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "key 'campaign'" in text, text[-3000:]
    assert "config/other.yaml" in text and "Traceback" not in text, text[-3000:]
