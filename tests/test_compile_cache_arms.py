"""Issue #40: the compile cache's state as a declared factor (models[].compile_cache):
shared, cold (emptied before every run) or per_environment (each environment loads only
what it wrote), at one path in every environment, stated in each record."""

from __future__ import annotations

import pytest

from containertax import cli
from containertax.campaign import config
from containertax.execution import compilecache
from tests.test_parity import TINY_LLM, _write


def _campaign(config_dict, tmp_path, arm):
    config_dict["models"] = [{**TINY_LLM, "compile_cache": arm}]
    return config.load_campaign(config_dict, "c.yaml")


def _run(c, env, writes):
    """One run's cache handling: prepare, the run writes its files, finish."""
    params = c.workload_params("tiny")
    folder, state = compilecache.prepare(c, "tiny", env, params)
    for name in writes:
        (folder / "inductor").mkdir(exist_ok=True)
        (folder / "inductor" / name).write_text(env)
    compilecache.finish(c, "tiny", env, params)
    return folder, state


def test_cold_empties_the_cache_before_every_run(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path, "cold")
    first, state = _run(c, "native", ["k1"])
    assert state == {"arm": "cold", "path": str(first), "files_before": 0}
    again, state = _run(c, "docker", [])
    assert again == first and state["files_before"] == 0  # one path, empty again


def test_per_environment_loads_only_what_that_environment_wrote(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path, "per_environment")
    native, state = _run(c, "native", ["n1", "n2"])
    assert state["files_before"] == 0 and state["restored_from"] == "native"
    docker, state = _run(c, "docker", ["d1"])
    assert docker == native  # the same path in every environment
    assert state["files_before"] == 0  # not native's two files
    _, state = _run(c, "native", [])
    assert state["files_before"] == 2  # its own, restored
    assert sorted(p.name for p in (native / "inductor").iterdir()) == ["n1", "n2"]
    _, state = _run(c, "docker", [])
    assert state["files_before"] == 1


def test_shared_is_the_campaigns_one_cache(config_dict, tmp_path):
    c = _campaign(config_dict, tmp_path, "shared")
    folder, state = _run(c, "native", ["k1"])
    assert folder == c.paths.compile_cache.resolve() and state["files_before"] == 0
    _, state = _run(c, "docker", [])
    assert state["files_before"] == 1  # what native wrote


def test_a_finish_killed_before_its_rename_leaves_the_old_copy(config_dict, tmp_path):
    """A half-written copy beside the saved one (a kill during finish) is replaced by the
    next finish; the saved copy is whole before and after."""
    c = _campaign(config_dict, tmp_path, "per_environment")
    _run(c, "native", ["n1"])
    saved = c.paths.compile_cache_saved("tiny", "native")
    partial = saved.with_name(saved.name + ".partial")
    partial.mkdir()
    (partial / "half").write_text("x")
    _, state = _run(c, "native", ["n2"])
    assert state["files_before"] == 1 and not partial.exists()
    assert sorted(p.name for p in (saved / "inductor").iterdir()) == ["n1", "n2"]


@pytest.mark.parametrize("arm, ok", [("cold", True), ("per_environment", True),
                                     ("warm", False)])
def test_check_takes_the_declared_arms_and_names_a_wrong_one(config_dict, tmp_path, capsys,
                                                             arm, ok):
    config_dict["models"] = [{**TINY_LLM, "compile_cache": arm}]
    assert (cli.main(["check", _write(tmp_path, config_dict), "-d", str(tmp_path)]) == 0) is ok
    if not ok:
        err = capsys.readouterr().err
        assert "compile_cache" in err and "warm" in err


def test_the_workloads_table_says_each_models_arm():
    """The paper's workloads table names the arm a record ran with, and says nothing for a
    record from before the arms (its campaign shared one cache)."""
    from containertax.publishing import facts

    rec = {"cell": {"model": "tiny"}, "detail": {},
           "workload": {"kind": "matmul", "params": {"size": 64}},
           "memory": {"compile_cache": {"arm": "cold", "files_before": 0}}}
    assert "cache of compiled code emptied before every run" in facts.workload_row(rec)["params"]
    rec["memory"] = {}
    assert "compiled code" not in facts.workload_row(rec)["params"]


def test_the_arms_folder_is_named_in_words_not_by_the_machines_path():
    """The paper's environments table words the arm's folder (bound at its host path) as
    the harness's, as it does the campaign's cache: no path of the measuring machine."""
    from containertax.publishing import facts

    live = "/work/x/results/c/compile-cache-arms/tiny/live"
    assert facts._mount_words(f"{live}:{live}:rw") == (
        "the model's cache-arm folder at its own host path")
    assert facts._harness_at_host_path(f"{live}:{live}:rw")
    assert not facts._harness_at_host_path("/usr/live:/usr/live:ro")


def test_a_long_model_id_gets_a_column_that_breaks_at_its_hyphens():
    """h200-cache-arms' 'llama-small-perenv' ran its tables 22 pt past the margin in a plain
    column; the committed campaigns' ids (at most 11 characters) keep the plain one."""
    from containertax.publishing import tables

    assert tables.id_spec(["llama-small-perenv", "x"]) == r"L{0.11\linewidth}"
    assert tables.id_cell("llama-small-perenv") == r"llama-\allowbreak{}small-\allowbreak{}perenv"
    assert tables.id_spec(["mm-10k-fp32", "qwen2-0.5b"]) == "l"
    assert tables.id_cell("qwen2-0.5b") == "qwen2-0.5b"


def test_an_arm_that_empties_its_cache_is_refused_with_two_lanes(config_dict, tmp_path,
                                                                 capsys):
    """Planted: two lanes would empty a cold arm's one folder under each other's runs."""
    config_dict["models"] = [{**TINY_LLM, "compile_cache": "cold"}]
    config_dict["repetitions"] = 2
    config_dict["lanes"] = [{"id": "a", "gpu": 0}, {"id": "b", "gpu": 1}]
    assert cli.main(["check", _write(tmp_path, config_dict), "-d", str(tmp_path)]) == 1
    assert "models[].compile_cache" in capsys.readouterr().err
    config_dict["models"] = [{**TINY_LLM, "compile_cache": "shared"}]
    assert cli.main(["check", _write(tmp_path, config_dict), "-d", str(tmp_path)]) == 0
