"""Config validation: valid configs load; each kind of mistake names file, key and fix."""

from __future__ import annotations

import pytest
import yaml

from containertax.campaign import config
from containertax.core import records
from tests.conftest import REPO


def test_demo_and_dgx_configs_load():
    demo = config.load_file(REPO / "config" / "demo.yaml")
    assert [e.id for e in demo.environments] == ["native", "native-aa", "chroot", "docker"]
    assert demo.replicas == {"native-aa": "native"}
    assert demo.thermal["threshold_c"] == 80
    dgx = config.load_file(REPO / "config" / "config.yaml")
    assert len(dgx.models) == 10 and dgx.repetitions == 30 and len(dgx.environments) == 3
    assert dgx.thermal["cooldown_s"] == 300 and dgx.thermal["threshold_c"] == 45


def test_defaults_are_filled(config_dict):
    del config_dict["thermal"]
    campaign = config.load_campaign(config_dict, "x.yaml")
    assert campaign.thermal["sensor"] == "auto"
    assert campaign.thermal["min_interval_s"] == 300
    assert campaign.telemetry["hz"] == 10


def test_model_params_override_workload_defaults(config_dict):
    campaign = config.load_campaign(config_dict, "x.yaml")
    assert campaign.workload_params("n256")["repeats"] == 40
    assert campaign.workload_params("n512")["repeats"] == 10


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c.update(repetitions=1), ["x.yaml", "repetitions", "minimum of 2"]),
        (lambda c: c["environments"]["docker"].pop("image"),
         ["x.yaml", "environments.docker.image", "needs the image"]),
        (lambda c: c["environments"]["native"].update(kind="lxc"),
         ["environments.native.kind", "lxc", "unknown environment kind"]),
        (lambda c: c["models"].append({"id": "n256", "size": 8}), ["duplicate id", "n256"]),
        (lambda c: c.update(reference_environment="vm"), ["reference_environment", "'vm'"]),
        (lambda c: c["environments"]["native"].update(options={"ipc": "host"}),
         ["environments.native.options", "only for kind chroot or docker or podman"]),
        (lambda c: c["models"][0].pop("size"), ["models[0].size", "positive integer"]),
        (lambda c: c["environments"]["docker"]["options"].update(shm_size="lots"),
         ["environments.docker.options.shm_size", "does not match"]),
        (lambda c: c["environments"]["docker"]["options"].update(seccomp=False),
         ["environments.docker.options.seccomp", "'default', 'unconfined'"]),
        (lambda c: c.update(colour="blue"), ["colour", "Additional properties"]),
        (lambda c: c["thermal"].update(sensor="ir-camera"), ["thermal.sensor"]),
    ],
)
def test_errors_name_file_key_and_fix(config_dict, mutate, expected):
    mutate(config_dict)
    with pytest.raises(ValueError) as err:
        config.load_campaign(config_dict, "x.yaml")
    for fragment in expected:
        assert fragment in str(err.value)


def test_yaml_syntax_error_names_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("campaign: [unclosed\n")
    with pytest.raises(config.ConfigError, match="bad.yaml: not valid YAML"):
        config.load_file(bad)


def test_missing_file(tmp_path):
    with pytest.raises(config.ConfigError, match="no such config file"):
        config.load_file(tmp_path / "nope.yaml")


def test_config_hash_changes_with_content(config_dict):
    a = config.load_campaign(config_dict, "x.yaml").config_hash()
    config_dict["repetitions"] = 5
    assert config.load_campaign(config_dict, "x.yaml").config_hash() != a


def test_every_schema_key_is_documented():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    readme = (REPO / "config" / "README.md").read_text()
    keys = set(schema["properties"])
    for name in ("environment", "docker_options", "podman_options", "schedule", "thermal",
                 "telemetry", "workload", "analysis", "memory", "lane"):
        keys |= set(schema["$defs"][name]["properties"])
    missing = sorted(k for k in keys if f"`{k}`" not in readme)
    assert not missing, f"config/README.md does not document {missing}"


def test_replica_is_the_original_under_its_own_id(config_dict):
    config_dict["environments"]["docker-aa"] = {"replica_of": "docker"}
    c = config.load_campaign(config_dict, "x.yaml")
    spec = c.environment("docker-aa").spec
    assert {k: v for k, v in spec.items() if k not in ("replica_of", "description")} == {
        k: v for k, v in c.environment("docker").spec.items() if k != "description"}
    assert c.replicas == {"native-aa": "native", "docker-aa": "docker"}


@pytest.mark.parametrize(("env", "fragment"), [
    ({"replica_of": "nowhere"}, "'environments.x-aa.replica_of': 'nowhere' is not another"),
    ({"replica_of": "native", "python": "/bin/py"}, "['python'] may not be set"),
    ({"replica_of": "native-aa"}, "'native-aa' is itself a replica"),
])
def test_replica_mistakes_name_the_key(config_dict, env, fragment):
    config_dict["environments"]["x-aa"] = env
    with pytest.raises(config.ConfigError) as err:
        config.load_campaign(config_dict, "x.yaml")
    assert fragment in str(err.value)


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("metrics", ["compute_time_s", "compute_tme_s"],
     "'analysis.metrics': unknown metric(s) ['compute_tme_s']"),
    ("primary_metrics", ["tok_s"], "'analysis.primary_metrics[0]': 'tok_s'"),
    ("headline_metric", "speed", "'analysis.headline_metric': 'speed'"),
    ("define_metrics", {"x": {"unit": "s", "dirction": "lower"}}, "'dirction' was unexpected"),
    ("primary_test", "auto", "'analysis.primary_test'"),
])
def test_unknown_analysis_names_are_errors(config_dict, key, value, fragment):
    config_dict["analysis"][key] = value
    with pytest.raises(config.ConfigError) as err:
        config.load_campaign(config_dict, "x.yaml")
    assert fragment in str(err.value)


@pytest.mark.parametrize("campaign", ["h100-engine", "h100-engine-gqa"])
def test_committed_llm_campaigns_keep_the_hash_their_records_carry(campaign):
    """Outside check: the transformers attention default changed (sdpa -> auto), and the
    committed engine configs pin what they measured; each still hashes as its records say."""
    hashes = {records.read_json(p)["provenance"]["config_hash"]
              for p in (REPO / "results" / campaign / "raw").glob("*/*/rep*.json")
              if not p.name.endswith(".cooldown.json")}
    assert hashes == {config.load_file(REPO / "config" / f"{campaign}.yaml").config_hash()}


def test_the_stopping_campaign_keeps_the_hash_its_records_carry(config_dict):
    """Issue #33 added stopping.boundaries (exact) and stopping.shape_check (true);
    config/h100-stopping.yaml names the rule it ran under (union, no check) and still
    hashes as its records say. Planted: the same config under the new rule is another
    campaign (another hash)."""
    hashes = {records.read_json(p)["provenance"]["config_hash"]
              for p in (REPO / "results" / "h100-stopping" / "raw").glob("*/*/rep*.json")
              if not p.name.endswith(".cooldown.json")}
    data = yaml.safe_load((REPO / "config" / "h100-stopping.yaml").read_text())
    assert hashes == {config.load_campaign(data, "h100-stopping.yaml").config_hash()}
    for key in ("boundaries", "shape_check"):
        new = {**data, "stopping": {k: v for k, v in data["stopping"].items() if k != key}}
        assert config.load_campaign(new, "h100-stopping.yaml").config_hash() not in hashes


def test_the_h100_config_pins_its_attention_and_keeps_its_hash():
    """results/h100's records carry the hash of an earlier edit of config/h100.yaml, so its
    pin is checked against the hash the config had before the default changed (f6fcfda)."""
    assert config.load_file(REPO / "config" / "h100.yaml").config_hash() == "c0e51683a536b3f7"


def test_a_config_left_at_the_new_attention_default_is_another_campaign(config_dict):
    """No two configs that measure differently share a hash: without the key a transformers
    workload now runs sdpa_gqa under engine decoding, so it must not hash as the configs
    that were measured with sdpa (which now name it, and hash as they did)."""
    config_dict["workload"] = {"kind": "transformers", "decoding": "engine"}
    config_dict["models"] = [{"id": "llm", "model_config": {"model_type": "llama"}}]
    default = config.load_campaign(config_dict, "x.yaml").config_hash()
    config_dict["workload"]["attn_implementation"] = "auto"
    assert config.load_campaign(config_dict, "x.yaml").config_hash() == default
    config_dict["workload"]["attn_implementation"] = "sdpa"
    assert config.load_campaign(config_dict, "x.yaml").config_hash() != default


def test_a_test_campaign_never_lives_in_the_checkouts_results(config_dict):
    """The demo run in the checkout (the README's first command) leaves results/demo with
    its schedule; a test's campaign of the same name must not read or extend it."""
    root = config.load_campaign(config_dict, "x.yaml").root.resolve()
    assert not root.is_relative_to(REPO), root
