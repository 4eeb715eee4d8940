"""What the paper's methods say about environments and workloads comes from the records:
here the committed records measured on the H100 (results/h100/raw), whose container mounts
the host's software read-only and gets the GPU as device nodes."""

from __future__ import annotations

import json

import pandas as pd

from containertax.publishing import facts
from containertax.statistics import policy
from tests.conftest import REPO

RAW = REPO / "results" / "h100" / "raw"


def record(model: str, env: str) -> dict:
    return json.loads((RAW / model / env / "rep01.json").read_text())


def test_the_h100_container_is_described_from_its_resolved_settings():
    docker = facts.environment_row(record("qwen2-0.5b", "docker"))
    assert docker["host_dirs"] == "/etc, /opt, /usr, /usr/local/nvidia"
    assert docker["read_only"] and "/containertax" not in docker["mounts"]  # harness left out
    assert docker["gpu"].startswith("6 device nodes") and "nvidiactl" in docker["gpu"]
    assert docker["flags"] == "--ipc host --network none"
    assert "IPC" not in docker["isolation"]  # --ipc host shares it
    native = facts.environment_row(record("qwen2-0.5b", "native"))
    assert native["gpu"] == "direct (host driver)" and native["mounts"] == "none"


def test_a_workload_lists_only_the_parameters_its_probe_reads():
    matmul = facts.workload_row(record("matmul-10k", "native"))
    assert "n 10000" in matmul["params"] and "batch" not in matmul["params"]
    llm = facts.workload_row(record("llama3-8b", "native"))
    assert llm["random_weights"] and "32 layers" in llm["params"]
    assert "batch 8" in llm["params"] and "output tokens 128" in llm["params"]


def test_workload_parameters_read_as_words_not_python():
    """The h100-engine-gqa record printed 'attn implementation sdpa gqa; ... coordinate
    descent False' and its compile cache under the checkout's absolute path."""
    rec = json.loads((REPO / "results" / "h100-engine-gqa" / "raw" / "llama3-8b" / "docker"
                      / "rep001.json").read_text())
    params = facts.workload_row(rec)["params"]
    assert "coordinate-descent tuning off" in params and "False" not in params
    assert "attention PyTorch SDPA (grouped-query)" in params
    assert "_" not in params and "attn implementation" not in params
    mounts = facts.environment_row(rec)["mounts"]
    assert "the campaign's compile-cache folder as /containertax/cache" in mounts
    assert "/work/" not in mounts


def test_the_compile_cache_at_its_host_path_is_named_not_printed():
    """results/h100-warmup's docker-hostpath binds the compile cache at the host's own path
    (/tmp/ctw/...): its paper printed that machine path among the host's software folders,
    and its review flagged it."""
    import copy

    rec = json.loads((REPO / "results" / "h100-warmup" / "raw" / "llama3-8b"
                      / "docker-hostpath" / "rep001.json").read_text())
    row = facts.environment_row(rec)
    assert "the campaign's compile-cache folder at its own host path" in row["mounts"]
    assert "/tmp" not in row["mounts"] and "/tmp" not in row["host_dirs"]
    assert row["host_dirs"] == "/etc, /opt, /usr, /usr/local/nvidia"
    assert "seccomp" not in row["isolation"]
    unconfined = copy.deepcopy(rec)  # the same record as options.seccomp: unconfined makes it
    unconfined["environment"]["resolved"]["create_kwargs"]["security_opt"] = [
        "seccomp=unconfined"]
    row = facts.environment_row(unconfined)
    assert row["isolation"].endswith("; no seccomp filter")
    assert "--security-opt seccomp=unconfined" in row["flags"]


def test_software_is_named_once():
    from containertax.publishing.facts import software_words

    assert software_words("blas", "blas,blas") == "BLAS (libblas)"
    assert software_words("blas", "openblas") == "BLAS openblas"
    assert software_words("numpy", "1.24.2") == "NumPy 1.24.2"


def test_a_model_without_the_headline_metric_takes_its_first_speed_metric():
    """A matrix product has no token throughput; its peak memory (equal in every run, no
    interval) says nothing about speed, so the median compute time is its headline."""
    results = pd.DataFrame([
        {"model": "matmul-10k", "metric": "peak_memory_gib", "rel_ci_low": float("nan")},
        {"model": "matmul-10k", "metric": "compute_time_median_s", "rel_ci_low": -0.01},
    ])
    metrics = ["token_throughput", "peak_memory_gib", "compute_time_median_s"]
    assert policy.headline_metric_of(results, "token_throughput", metrics) == \
        "compute_time_median_s"


def test_the_gqa_campaigns_order_is_read_from_its_ledgers_and_is_not_balanced():
    """The committed h100-engine-gqa (alternating, 3 environments): its visits' ledgers give
    the order; native-aa ran second in all 6 blocks, so the paper may not call positions
    (or carry-over) balanced, and says which environment ran where."""
    from containertax.campaign.paths import CampaignPaths
    from containertax.statistics import aggregate, order

    root = REPO / "results" / "h100-engine-gqa"
    ledger = order.ledger_runs(CampaignPaths(root))
    assert len(ledger) == 18  # the visits' copies repeat events: counted once
    realised = order.realised(aggregate.tidy(root), ledger)
    assert set(realised["source"]) == {"ledger"} and realised["planned"].all()
    bal = order.balance(realised, ["native", "native-aa", "docker"])
    assert bal["positions"]["native-aa"].tolist() == [0, 6, 0]
    assert bal["positions"]["native"].tolist() == [3, 0, 3]
    v = order.macros(bal, "alternating")
    assert v["order-known"] and not v["positions-balanced"] and not v["carryover-balanced"]
    assert "native-aa ran second 6 times" in v["position-counts"]
    assert "tab:design" in order.design_table(bal)


def _runs(orders: list[list[str]], **extra: object) -> pd.DataFrame:
    rows = []
    for b, envs in enumerate(orders, 1):
        for i, e in enumerate(envs):
            rows.append({"model": "m", "environment": e, "repetition": b, "block": b,
                         "position": 10 * b + i, "attempt": f"{b}{e}",
                         "started_utc": f"2026-01-0{b}T00:0{i}:00+00:00", **extra})
    return pd.DataFrame(rows)


def test_a_williams_order_is_balanced_and_a_deviation_is_named():
    """ABBA with 2 environments, and a 3-environment Williams period (6 blocks): balanced
    in position and carry-over. Planted: one block run out of order (by the records' start
    times) -> not balanced, and the run off its planned place is counted."""
    from containertax.campaign.designs import williams_rows
    from containertax.statistics import order

    two = order.balance(order.realised(_runs([["a", "b"], ["b", "a"]])), ["a", "b"])
    assert two["positions_balanced"] and two["carryover_balanced"]
    envs = ["a", "b", "c"]
    blocks = [[envs[i] for i in row] for row in williams_rows(3)]
    runs = _runs(blocks)
    bal = order.balance(order.realised(runs), envs)
    assert bal["positions_balanced"] and bal["carryover_balanced"] and bal["off_plan"] == 0
    v = order.macros(bal, "williams")
    assert v["position-each"] == 2 and v["carryover-each"] == 2
    late = runs.copy()  # block 1's first run actually ran last
    first = (late.block == 1) & (late.environment == blocks[0][0])
    late.loc[first, "started_utc"] = "2026-01-01T00:09:00+00:00"
    bad = order.balance(order.realised(late), envs)
    assert not bad["positions_balanced"] and bad["off_plan"] == 3
    assert bad["sources"] == ["records"]


def test_without_blocks_or_times_the_order_is_unknown():
    """An imported table without blocks (or a table with neither times nor positions):
    no order, so the paper says the order is unknown; positions alone give the plan."""
    from containertax.statistics import order

    runs = _runs([["a", "b"], ["b", "a"]])
    assert order.realised(runs.assign(block=float("nan"))).empty
    unknown = order.balance(order.realised(runs.drop(columns=["started_utc", "position"])),
                            ["a", "b"])
    assert order.macros(unknown, "williams")["order-known"] is False
    planned = order.realised(runs.drop(columns=["started_utc"]))
    assert set(planned["source"]) == {"positions"}


def test_environment_rows_read_as_sentences_from_main_tex(tmp_path):
    """tables.environments_table writes the recorded values only; main.tex's \\envsetup
    words them ('Host paths mounted: ... (read-only).'), as Python's f-string did."""
    import re
    import shutil
    import subprocess

    import pytest

    from containertax.publishing import tables

    if shutil.which("latexmk") is None or shutil.which("pdftotext") is None:
        pytest.skip("needs TeX Live and poppler-utils")
    main = (REPO / "paper" / "main.tex").read_text()
    envsetup = re.search(r"\\newcommand\{\\envsetup\}(?:.|\n)*?Isolated: #6\.\}", main).group(0)
    rows = [dict(environment="docker", software="image x:1", mounts="/usr, /opt",
                 read_only=True, gpu="6 device nodes", flags="--ipc host",
                 isolation="namespaces"),
            dict(environment="native", software="the host software", mounts="none",
                 read_only=False, gpu="direct (host driver)", flags="none", isolation="none")]
    table = tables.environments_table(rows).replace("\\papercaption{tab:environments}", "")
    (tmp_path / "main.tex").write_text(
        "\\documentclass{article}\\usepackage{booktabs,array}\\pagestyle{empty}"
        "\\newcolumntype{L}[1]{>{\\raggedright\\arraybackslash}p{#1}}" + envsetup
        + "\\begin{document}\n" + table + "\\end{document}\n")
    subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                    "main.tex"], cwd=tmp_path, capture_output=True, timeout=300, check=True)
    text = " ".join(subprocess.run(["pdftotext", "main.pdf", "-"], cwd=tmp_path, check=True,
                                   capture_output=True, text=True).stdout.split())
    assert ("Software: image x:1. Host paths mounted: /usr, /opt (read-only). GPU access: 6 "
            "device nodes. Engine flags: --ipc host. Isolated: namespaces.") in text
    assert ("Software: the host software. Host paths mounted: none. GPU access: direct (host "
            "driver). Engine flags: none. Isolated: none.") in text


def _planted_campaign(root, plant) -> dict:
    """Copies of results/h100's qwen2-0.5b and matmul-10k records (native and docker, two
    repetitions each), each changed by plant(model, env, rep, record), read back through
    the validated reader (facts.from_records)."""
    for model in ("matmul-10k", "qwen2-0.5b"):
        for env in ("native", "docker"):
            (root / "raw" / model / env).mkdir(parents=True)
            for rep in ("rep01", "rep02"):
                rec = json.loads((RAW / model / env / f"{rep}.json").read_text())
                plant(model, env, rep, rec)
                (root / "raw" / model / env / f"{rep}.json").write_text(json.dumps(rec))
    return facts.from_records(root)


def _attention(rec: dict, name: str) -> None:
    argv = rec["workload"]["argv"]
    argv[argv.index("--attn-implementation") + 1] = name


def test_the_workloads_table_prints_each_models_recorded_parameters(tmp_path):
    """h100-stopping-exact's Table 3 printed 'attention auto' (today's registry default)
    for qwen2-0.5b, whose 16 records all ran sdpa_gqa. Planted: qwen2's records ran eager
    attention in repetition 1 and sdpa in 2 (argv, as the probe was launched); the table
    prints each value with its run count, never a default; a parameter no record holds
    (a plain run compiles nothing: no compile mode) is left out, neither filled in nor
    printed as unknown."""
    from containertax.publishing import tables

    def plant(model: str, env: str, rep: str, rec: dict) -> None:
        if model == "qwen2-0.5b":
            _attention(rec, "eager" if rep == "rep01" else "sdpa")

    table = tables.workloads_table(_planted_campaign(tmp_path, plant)["workloads"])
    assert "attention eager in 2 runs, PyTorch SDPA in 2 runs" in table
    assert "auto" not in table
    assert "torch.compile" not in table and "not recorded" not in table
    assert "warm-up 3; timed repeats 20; dtype float32; threads 1; backend torch; n 10000" \
        in table  # the matrix product's, as its records hold them


def test_the_environments_table_holds_every_records_mounts(tmp_path):
    """h100-stopping-exact's Table 2 said Docker mounted /usr, /opt, /etc and
    /usr/local/nvidia read-only, from the first Docker record read (a matrix product's);
    its 8 qwen2 Docker records also mounted the compile cache read-write. Planted: qwen2's
    Docker records bind a cache folder read-write; the table names it, its mode and the
    model whose runs mounted it."""
    from containertax.publishing import tables

    def plant(model: str, env: str, rep: str, rec: dict) -> None:
        if model == "qwen2-0.5b" and env == "docker":
            rec["environment"]["resolved"]["volumes"].insert(
                2, "/tmp/ctw/results/x/compile-cache:/containertax/cache:rw")

    found = _planted_campaign(tmp_path, plant)
    docker = next(env for env in found["environments"] if env["environment"] == "docker")
    table = tables.environments_table(found["environments"])
    assert ("/usr, /opt, /etc, /usr/local/nvidia (read-only); the campaign's compile-cache "
            "folder as /containertax/cache (read-write, in the runs of qwen2-0.5b only)") in table
    assert not docker["read_only"]  # main.tex's '(read-only)' after the list: not all are
    assert docker["host_dirs"] == "/etc, /opt, /usr, /usr/local/nvidia"
