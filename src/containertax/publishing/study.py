"""A study: several campaigns analysed as one (config `study:`), from their raw records only.

Each campaign is analysed by its own workflow (quality, statistics, correction within its
families: stats/comparisons.csv); the study takes the comparisons of its declared family
(`study.family`: the campaigns' family names whose tests it pools, by default the primary
family), corrects them again as ONE family with the per-campaign routine
(statistics/correction.py: Bonferroni and Benjamini-Hochberg), and cites each campaign's raw
data by folder and a content hash (sha256 over its sorted raw files). Where a campaign's
environment takes options derived from another campaign's analysis (`derived_from`, phase
2B -> 2C/2D), the dependence is stated from the derived file, not from the config's words.

Each comparison of the family gets its verdict word from the campaign paper's decision table
(statistics/decisions.py: TOST within the campaign's equivalence margin, the BH-corrected
difference, the A/A and quality caveats), once with the campaign's own correction and once
with the study's (BH for the difference, Holm over the family's TOST p values for
equivalence: a claim across the study holds family-wise either way); each campaign's
quality findings, exclusions and A/A status, and the system it ran on (read from its raw
records), travel with it into the study's paper, which states from those records what
the campaigns share (they are separate runs, not independent replications, where they
share a host, a GPU, an image or a day).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from containertax.campaign import config as ct_config
from containertax.campaign import paths as R
from containertax.core import records
from containertax.publishing import quality_section, tables
from containertax.statistics import correction, decisions, texts
from containertax.workloads.metric_registry import registry


class StudyError(ct_config.ConfigError):
    """A study config or its inputs that cannot be used; the message names file and key."""


@dataclass(frozen=True)
class StudyCampaign:
    name: str
    config: Path  # the campaign's config file, as the study names it (relative to cwd)
    campaign: ct_config.Campaign
    why: str = ""  # why the study includes it (the study config's words)


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    source: str
    campaigns: tuple[StudyCampaign, ...]
    family: tuple[str, ...]
    run_cells: bool
    root: Path
    # the paper's words (study config): title, authors, affiliation, question,
    # abstract_lead, prior_work ids, the author's own text files, campaigns left out and why
    meta: dict[str, Any] = field(default_factory=dict)

    def campaign(self, name: str) -> StudyCampaign:
        return next(c for c in self.campaigns if c.name == name)


def is_study(data: Any) -> bool:
    return isinstance(data, dict) and "study" in data


def load(data: dict[str, Any], source: str, workdir: Path = Path(".")) -> Study:
    """The study a config mapping describes; each named campaign config loaded and checked."""
    spec = data.get("study") if isinstance(data, dict) else None
    if not isinstance(spec, dict):
        raise StudyError(f"{source}: key 'study' must be a mapping with name, campaigns and "
                         "family; see config/README.md, 'Studies'.")
    stray = sorted(set(data) - {"study", "results_dir"})
    if stray:
        raise StudyError(f"{source}: unknown top-level key(s) {stray} in a study config; a "
                         "study has only 'study' (and 'results_dir').")
    allowed = {"name", "description", "campaigns", "family", "run_cells", *META_KEYS}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise StudyError(f"{source}: key 'study': unknown key(s) {unknown}; allowed: "
                         f"{sorted(allowed)}.")
    name = spec.get("name")
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise StudyError(f"{source}: key 'study.name' must be a name of letters, digits, - "
                         f"and _, got {name!r}.")
    entries = spec.get("campaigns")
    if not isinstance(entries, list) or not entries:
        raise StudyError(f"{source}: key 'study.campaigns' must list the campaigns, each "
                         "'{name: NAME, config: FILE}' (FILE relative to the study config).")
    family = spec.get("family", ["primary"])
    if isinstance(family, str):
        family = [family]
    if not isinstance(family, list) or not family or not all(isinstance(f, str) for f in family):
        raise StudyError(f"{source}: key 'study.family' must list the campaigns' family names "
                         f"whose tests the study corrects together (e.g. [primary]), got "
                         f"{family!r}.")
    campaigns = []
    for i, entry in enumerate(entries):
        where = f"{source}: key 'study.campaigns[{i}]"
        if not isinstance(entry, dict) or not {"name", "config"} <= set(entry) <= {
                "name", "config", "why"}:
            raise StudyError(f"{where}': give '{{name: NAME, config: FILE, why: TEXT}}' (why "
                             f"optional), got {entry!r}.")
        path = Path(source).parent / str(entry["config"])
        if not path.is_file():
            raise StudyError(f"{where}.config': {path} does not exist; name the campaign's "
                             "config file relative to the study config.")
        try:
            campaign = ct_config.load_file(path, workdir)
        except ct_config.ConfigError as exc:
            raise StudyError(f"{where}': {exc}") from None
        if campaign.name != entry["name"]:
            raise StudyError(f"{where}.name': '{entry['name']}' but {path} is campaign "
                             f"'{campaign.name}'; write the campaign's own name.")
        campaigns.append(StudyCampaign(campaign.name, Path(_relative(path)), campaign,
                                       " ".join(str(entry.get("why", "")).split())))
    names = [c.name for c in campaigns]
    if len(set(names)) != len(names):
        raise StudyError(f"{source}: key 'study.campaigns' names a campaign twice: {names}.")
    results_dir = Path(workdir) / str(data.get("results_dir", "results"))
    return Study(name, str(spec.get("description", "")), source, tuple(campaigns),
                 tuple(family), bool(spec.get("run_cells", False)),
                 R.study_root(results_dir, name), meta_of(spec, source))


# the paper's words a study config may give (config/README.md, 'Studies')
META_KEYS = ("title", "authors", "affiliation", "question", "abstract_lead", "prior_work",
             "introduction_file", "discussion_file", "conclusion_file", "excluded")
# the author's own LaTeX files and the name each is typeset from in the paper folder
AUTHOR_FILES = {"introduction_file": "intro-author.tex",
                "discussion_file": "discussion-author.tex",
                "conclusion_file": "conclusion-author.tex"}


def meta_of(spec: dict[str, Any], source: str) -> dict[str, Any]:
    """The study config's words for its paper, checked: the author's text files exist
    (relative to the study config) and every campaign left out says why."""
    meta = {k: spec[k] for k in META_KEYS if k in spec}
    for key in AUTHOR_FILES:
        if key in meta:
            path = Path(source).parent / str(meta[key])
            if not path.is_file():
                raise StudyError(f"{source}: key 'study.{key}': {path} does not exist; name "
                                 "the author's LaTeX file relative to the study config.")
            meta[key] = str(path)
    for i, entry in enumerate(meta.get("excluded") or []):
        if not isinstance(entry, dict) or set(entry) != {"name", "why"}:
            raise StudyError(f"{source}: key 'study.excluded[{i}]': give '{{name: CAMPAIGN, "
                             f"why: TEXT}}', got {entry!r}.")
    authors = meta.get("authors") or []
    if not isinstance(authors, list):
        raise StudyError(f"{source}: key 'study.authors' must be a list of names.")
    return meta


def load_file(path: str | Path, workdir: Path = Path(".")) -> Study:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise StudyError(f"{path}: cannot be read as YAML: {exc}") from None
    return load(data, str(path), workdir)


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def raw_hash(campaign_root: Path) -> tuple[str, int]:
    """sha256 over the campaign's raw files and how many files it covers: for each file in
    order of its path compared folder by folder (Path ordering: a list of components,
    not one string), its path relative to raw/ (POSIX, UTF-8), a NUL byte and the 32-byte
    sha256 digest of its content (files and folders beginning with a dot, such as records
    moved aside under raw/.<why>/, left out). The same records give the same hash on any
    machine; the study paper's data caption states this construction and `containertax
    raw-hash` recomputes it."""
    raw = Path(campaign_root) / "raw"
    files = sorted(p for p in raw.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(raw).parts))
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(raw).as_posix()).encode() + b"\0")
        digest.update(hashlib.sha256(p.read_bytes()).digest())
    return digest.hexdigest(), len(files)


def file_hash(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def derived_sources(campaign: ct_config.Campaign) -> list[dict[str, Any]]:
    """The environments of this campaign whose options another campaign derived."""
    return [{"environment": e.id, **e.spec["options_source"]} for e in campaign.environments
            if e.spec.get("options_source", {}).get("kind") == "derived"]


# the summary's format: raise it when summarize() writes other keys (workflow/study.smk
# rewrites the summaries when this module is newer than them; write() refuses a summary
# without the keys it reads, naming it)
SUMMARY_VERSION = 6


def summarize(study: Study, name: str) -> dict[str, Any]:
    """One campaign's entry of the study: its design, its data's hash, its comparisons."""
    entry = study.campaign(name)
    c = entry.campaign
    digest, n_files = raw_hash(c.root)
    comparisons = c.paths.comparisons
    if not comparisons.is_file():
        raise StudyError(f"{comparisons} does not exist: campaign {name}'s analysis has not "
                         f"run (snakemake --configfile {entry.config} paper).")
    if not c.paths.findings.is_file():
        raise StudyError(f"{c.paths.findings} does not exist: campaign {name}'s findings "
                         f"step has not run (snakemake --configfile {entry.config} paper).")
    metrics = sorted(set(pd.read_csv(comparisons)["metric"].astype(str)))
    recs = records_of(c)  # read once: the system, the workloads and where the reference ran
    return {
        "summary_version": SUMMARY_VERSION,
        "campaign": name, "config": str(entry.config), "description": c.raw.get("description", ""),
        "raw_dir": str(c.root / "raw"), "raw_sha256": digest, "raw_files": n_files,
        "records": len(c.paths.raw_records()),
        "models": [m.id for m in c.models], "environments": [e.id for e in c.environments],
        "reference": c.reference, "repetitions": c.repetitions,
        "workloads": sorted({c.workload_kind(m.id) for m in c.models}),
        "workload_rows": workloads_of(recs),
        "comparisons": str(comparisons), "comparisons_sha256": file_hash(comparisons),
        "options": {e.id: e.spec.get("options_source") for e in c.environments
                    if e.spec.get("options_source")},
        "alpha": c.analysis["alpha"], "equivalence_margin": c.analysis["equivalence_margin"],
        "define_metrics": c.analysis.get("define_metrics"),
        "quality": quality_of(c.paths.quality, metrics),
        "system": system_of(c, recs),
        "why": entry.why,
        "design": c.schedule.get("design", ""), "stopping": bool(c.raw.get("stopping")),
        "resolution_pct": float(c.analysis["resolution_pct"]),
        "kept": str(c.paths.kept), "thermal": thermal_of(c.paths.quality),
        "findings": str(c.paths.findings),
        "where": where_of(c, recs),
        "threats": threat_facts(c),
    }


def records_of(campaign: ct_config.Campaign) -> list[Any]:
    """The campaign's raw records, through the validated reader; [] for an import."""
    from containertax.statistics.aggregate import read_records

    return [] if campaign.is_import else [rec for _, rec in read_records(campaign.root)]


def workloads_of(recs: list[Any]) -> list[dict[str, Any]]:
    """Each model's workload and the parameters its raw records hold (the campaign paper's
    workload table, publishing/facts.workload_summary); [] without records (an import)."""
    from containertax.publishing import facts

    by_model: dict[str, list[dict[str, Any]]] = {}
    for rec in recs:
        as_dict = rec.to_dict()
        by_model.setdefault(as_dict["cell"]["model"], []).append(as_dict)
    return [{k: w[k] for k in ("model", "kind", "params")}
            for w in map(facts.workload_summary, by_model.values())]


def threat_facts(campaign: ct_config.Campaign) -> dict[str, Any]:
    """What the campaign paper's threats section states from the records, for the study's
    pooled threats: clocks lowered inside the measured windows, the host's software in the
    container, random weights, how many GPUs ran the blocks and whether a block was split
    between them (publishing/design_values.py, the campaign paper's own values)."""
    from containertax.publishing import design_values as dv
    from containertax.statistics.aggregate import tidy

    if campaign.is_import:
        return {}
    runs = tidy(campaign.root)
    design = dv.design_values(campaign, runs)
    path = campaign.paths.quality
    report = json.loads(path.read_text()) if path.is_file() else {"findings": []}
    clocks = dv.clock_values(report)
    return {"clocks": clocks["clock-throttle-words"] if clocks["clock-throttled"] else "",
            "host_dirs": (design["container-host-dirs"]
                          if design["container-host-software"] else ""),
            "random_weights": bool(design["random-weights"]),
            "n_gpus": int(design["n-gpus"]), "blocks_split": bool(design["blocks-split"])}


def thermal_of(path: Path) -> list[dict[str, Any]]:
    """The campaign's thermal dependences (quality.json), for the pooled threats."""
    report = json.loads(Path(path).read_text()) if Path(path).is_file() else {}
    return [{"metric": (f.get("details") or {}).get("metric", ""),
             "effect_pct": (f.get("details") or {}).get("effect_pct")}
            for f in report.get("findings", []) if f.get("check") == "thermal_dependence"
            and (f.get("details") or {}).get("metric")]


def where_of(campaign: ct_config.Campaign, recs: list[Any] | None = None) -> str:
    """Where the campaign's reference ran, in words (statistics/hostmarkers.py), where it was
    not bare metal (a VM, a container); '' otherwise (and for an import, without records).
    recs: the records already read."""
    from containertax.statistics import hostmarkers

    if campaign.is_import:
        return ""
    recs = records_of(campaign) if recs is None else recs
    v = hostmarkers.values(recs, campaign.reference, [e.id for e in campaign.environments])
    return str(v["ref-where"]) if v["ref-virtualised"] else ""


def quality_of(path: Path, metrics: list[str]) -> dict[str, Any]:
    """What the campaign paper's quality section raises, from its quality.json: every
    finding (check, severity, message), how many values the exclusion rule dropped, the
    A/A control's status (overall and per metric) and the metrics an error concerns."""
    if not Path(path).is_file():
        raise StudyError(f"{path} does not exist: the campaign's quality step has not run "
                         "(rerun the study workflow).")
    report = json.loads(Path(path).read_text())
    findings = [{k: f.get(k) for k in ("check", "severity", "message")}
                for f in report.get("findings", [])]
    calibration = report.get("calibration") or {}
    return {"findings": findings, "excluded": len(report.get("excluded", [])),
            "n_rows": int(report.get("n_rows", 0)),
            "aa_status": str(calibration.get("status", "none")),
            "aa_metrics": dict(calibration.get("metrics") or {}),
            # the metrics its status is that of (quality.calibration: the primary family's)
            "aa_primary": list(dict.fromkeys(
                str(r["metric"]) for r in calibration.get("comparisons") or []
                if r.get("family") == "calibration")),
            "error_metrics": sorted(decisions.error_metrics(report.get("findings", []),
                                                            metrics))}


# the system facts a campaign's records state, in the order the study's table prints them
SYSTEM_FACTS = ("host", "gpu", "gpu_uuid", "driver", "cuda", "engine", "image", "image_id",
                "date")


def system_of(campaign: ct_config.Campaign, recs: list[Any] | None = None
              ) -> dict[str, list[str]]:
    """Each system fact's values over the campaign's raw records (not the machine that
    rebuilds the study; recs: those already read): host name, GPU model and UUID, driver,
    CUDA (driver API), Docker Engine, container image name and id, and the UTC days the
    runs started."""
    seen: dict[str, set[str]] = {k: set() for k in SYSTEM_FACTS}

    def note(key: str, value: Any) -> None:
        if value not in (None, ""):
            seen[key].add(str(value))

    for rec in records_of(campaign) if recs is None else recs:
        gpu = rec.telemetry.get("gpu") or {}
        note("host", rec.provenance.get("host", {}).get("hostname"))
        note("gpu", gpu.get("name") or rec.gate.get("sensor_info", {}).get("gpu_name"))
        note("gpu_uuid", gpu.get("uuid") or rec.gate.get("sensor_info", {}).get("gpu_uuid"))
        note("driver", gpu.get("driver"))
        note("cuda", gpu.get("cuda_driver"))
        resolved = rec.environment.get("resolved", {})
        note("engine", resolved.get("engine_version"))
        image = resolved.get("image") or {}
        note("image", image.get("name"))
        note("image_id", str(image.get("id") or "").removeprefix("sha256:")[:12])
        note("date", str(rec.started_utc or "")[:10])
    return {k: sorted(v) for k, v in seen.items()}


COLUMNS = ["campaign", "model", "metric", "environment", "reference", "campaign_family",
           "n_blocks", "rel_overhead", "rel_ci_low", "rel_ci_high", "p",
           "p_bonferroni_campaign", "p_bh_campaign", "tost_p", "mde_rel"]


@dataclass(frozen=True)
class Evidence:
    """What a campaign's decision table reads besides a comparison's statistics."""
    alpha: float = 0.05
    equivalence_margin: float = math.nan
    directions: dict[str, str] = field(default_factory=dict)  # metric -> lower/higher/none
    aa: dict[str, str] = field(default_factory=dict)  # metric -> A/A status
    errors: frozenset[str] = frozenset()  # metrics an error-severity finding concerns


def evidence_of(summary: dict[str, Any]) -> Evidence:
    reg = registry(summary.get("define_metrics"))
    quality = summary["quality"]
    return Evidence(float(summary["alpha"]), float(summary["equivalence_margin"]),
                    {m: info.direction for m, info in reg.items()},
                    dict(quality["aa_metrics"]), frozenset(quality["error_metrics"]))


def _verdict(r: dict[str, Any], ev: Evidence, p_bh: str) -> str:
    """decisions.verdict with the named BH column as the difference's corrected p."""
    row = {**r, "p_bh": r.get(p_bh)}
    metric = str(r["metric"])
    return decisions.verdict(row, ev.directions.get(metric, "none"), ev.alpha,
                             aa_status=ev.aa.get(metric),
                             quality_error=metric in ev.errors).short


def combine(study: Study, comparisons: dict[str, pd.DataFrame],
            evidence: dict[str, Evidence] | None = None) -> pd.DataFrame:
    """The study's family: every campaign's comparisons in the declared families, corrected
    together (correction.correct over one family; the per-campaign adjustments kept), each
    with its campaign's equivalence test and MDE and its verdict by the decision table:
    `verdict_campaign` with the campaign's BH p and its TOST p (as its paper says),
    `verdict_study` with the study's BH p and the TOST p Holm-corrected over the study's
    family (what the study may say: equivalence, too, is claimed family-wise)."""
    evidence = evidence or {}
    frames = []
    for entry in study.campaigns:
        frame = comparisons[entry.name]
        if "family" not in frame:
            raise StudyError(f"{entry.name}'s comparisons.csv: no 'family' column; rebuild "
                             "the campaign's analysis.")
        mine = frame[frame["family"].isin(study.family)].copy()
        mine.insert(0, "campaign", entry.name)
        mine = mine.rename(columns={"family": "campaign_family",
                                    "p_bonferroni": "p_bonferroni_campaign",
                                    "p_bh": "p_bh_campaign"})
        frames.append(mine.reindex(columns=COLUMNS))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    out = correction.correct(table.assign(family="study"))
    out = out.rename(columns={"family": "study_family", "p_bonferroni": "p_bonferroni_study",
                              "p_bh": "p_bh_study", "family_size": "study_family_size"})
    ev = [evidence.get(str(c), Evidence()) for c in out["campaign"]]
    rows = out.to_dict("records")
    out["equivalence_margin"] = [e.equivalence_margin for e in ev]
    out["equivalent"] = [bool(r["tost_p"] < e.alpha) if pd.notna(r["tost_p"]) else None
                         for r, e in zip(rows, ev, strict=True)]
    # equivalence across the study is a family-wise claim like the difference: Holm over
    # the family's TOST p values (the campaign's verdict keeps its own, per comparison)
    out["tost_p_holm_study"] = correction.holm(out["tost_p"])
    out["verdict_campaign"] = [_verdict(r, e, "p_bh_campaign")
                               for r, e in zip(rows, ev, strict=True)]
    out["verdict_study"] = [_verdict({**r, "tost_p": h}, e, "p_bh_study") for r, e, h in
                            zip(rows, ev, out["tost_p_holm_study"], strict=True)]
    return out


# --- LaTeX parts -----------------------------------------------------------------------

def _list(items: list[str]) -> str:
    return ", ".join(tables.code(texts.tex(i)) for i in items)


def design_tex(summaries: list[dict[str, Any]]) -> str:
    """One subsection per campaign: what it compared, on what, how often."""
    out = []
    for s in summaries:
        design = {"williams": "in a Williams design", "alternating": "in alternating order",
                  "random": "in random order"}.get(str(s.get("design", "")), "")
        stopping = (" under a sequential stopping rule (at most that many blocks per model; "
                    "its verdicts are those of the look at which a model stopped)"
                    if s.get("stopping") else "")
        out.append(f"\\subsection{{Campaign {tables.code(texts.tex(s['campaign']))}}}\n"
                   f"{texts.tex(s['description'])}.\n"
                   f"Models: {_list(s['models'])}. The environments of "
                   f"{tables.code(texts.tex(s['campaign']))}, {_list(s['environments'])}, "
                   f"each compared with {tables.code(texts.tex(s['reference']))}. "
                   + (("Each model's workload and parameters: "
                       "Table~\\ref{tab:study-workloads}. ") if s.get("workload_rows") else
                      # no records to read them from (an import): the configured kinds
                      f"Workload: {texts.tex(tables.join_words(s['workloads']))}. ")
                   + f"{s['repetitions']} blocks {design}{stopping}; {s['records']} raw "
                   "records.\n")
        for env, src in s["options"].items():
            out.append(options_sentence(env, src) + "\n")
    return "\n".join(out) + "\n" + workloads_table(summaries)


def workloads_table(summaries: list[dict[str, Any]]) -> str:
    """One table of every included campaign's models: the workload and the parameters its
    records hold (sizes, dtype, batch, tokens), as each campaign paper's workload table."""
    rows = [[tables.code(texts.tex(s["campaign"])), tables.id_cell(w["model"]),
             texts.tex(w["kind"]), tables.code(texts.tex(w["params"]))]
            for s in summaries for w in s.get("workload_rows") or []]
    if not rows:
        return ""
    return tables.booktabs(["Campaign", "Model", "Workload", "Parameters (as recorded)"], rows,
                           r"L{0.19\linewidth}L{0.12\linewidth}L{0.17\linewidth}"
                           r"L{0.38\linewidth}", "tab:study-workloads", size=r"\footnotesize")


def options_sentence(env: str, src: dict[str, Any]) -> str:
    opts = ", ".join(f"{k}={v}" for k, v in (src.get("options") or {}).items()) or "none"
    if src.get("kind") == "derived":
        return (f"The options of {tables.code(texts.tex(env))} ({texts.tex(opts)}) were "
                f"derived from campaign {tables.code(texts.tex(src['campaign']))}'s analysis "
                f"(its derived options file, sha256 "
                f"\\texttt{{{src['sha256'][:16]}}}; qualifying variants: "
                f"{_list(src.get('qualifying') or ['none'])}).")
    return (f"The options of {tables.code(texts.tex(env))} ({texts.tex(opts)}) were "
            "declared by hand, not derived from a campaign's analysis.")


def dependence_tex(study: Study, summaries: list[dict[str, Any]]) -> str:
    """Which campaign's analysis fed which campaign's design, from the derived files; empty
    where none did (study.tex says so from numbers.tex's studyDerived)."""
    lines = []
    for s in summaries:
        for env, src in s["options"].items():
            if src.get("kind") == "derived":
                lines.append(f"Campaign {tables.code(texts.tex(s['campaign']))} depends on "
                             f"{tables.code(texts.tex(src['campaign']))}: "
                             + options_sentence(env, src))
    return "\n\n".join(lines) + "\n" if lines else ""


def derived_count(summaries: list[dict[str, Any]]) -> int:
    return sum(src.get("kind") == "derived" for s in summaries for src in s["options"].values())


# numbers.tex's name of each system fact (studyFactor<Name>: 2 shared by every campaign,
# 1 by some, 0 by none; studyFactor<Name>Value: the value all share)
FACTOR_MACRO = {"host": "Host", "gpu": "Gpu", "gpu_uuid": "GpuUuid", "driver": "Driver",
                "cuda": "Cuda", "engine": "Engine", "image": "Image", "image_id": "ImageId",
                "date": "Date"}


def shared_factors(summaries: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    """Per system fact: 2 and the common value(s) where every campaign's records hold a
    value in common, 1 where at least two campaigns do, 0 otherwise (a campaign whose
    records state no value shares nothing)."""
    out: dict[str, tuple[int, str]] = {}
    for key in SYSTEM_FACTS:
        sets = [set(s["system"].get(key, [])) for s in summaries]
        common = set.intersection(*sets) if sets else set()
        if len(sets) > 1 and common:
            out[key] = (2, "; ".join(sorted(common)))
        elif any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
            out[key] = (1, "")
        else:
            out[key] = (0, "")
    return out


def system_tex(summaries: list[dict[str, Any]]) -> str:
    """Each campaign's system, from its raw records: one row per campaign."""
    def cell(s: dict[str, Any], *keys: str) -> str:
        values = ["; ".join(s["system"].get(k, [])) or "--" for k in keys]
        return r"\newline ".join(texts.tex(v) for v in values)

    rows = [[tables.code(texts.tex(s["campaign"])), cell(s, "host"),
             cell(s, "gpu", "gpu_uuid"), cell(s, "driver", "cuda"), cell(s, "engine"),
             cell(s, "image", "image_id"), cell(s, "date")] for s in summaries]
    header = ["Campaign", "Host", r"GPU\newline UUID", r"Driver\newline CUDA",
              r"Docker\newline Engine", r"Image\newline id", r"Days\newline (UTC)"]
    return tables.longtable(header, rows, "L{1.9cm}L{0.8cm}L{2.6cm}L{1.5cm}L{2.2cm}"
                            "L{2.3cm}L{1.7cm}", "tab:study-system")


def aa_words(q: dict[str, Any], reg: dict[str, Any]) -> str:
    """What the A/A control showed, per metric group: its status is its primary metrics'
    (quality.calibration), and h100-engine-balanced's 'passed' hid that it was inconclusive
    on four other metrics. 'passed on its primary metric (token throughput); on its other
    metrics passed on six, inconclusive on four (GPU energy, ...)'."""
    def name(metric: str) -> str:
        return tables.in_prose(reg.get(metric), metric)

    per_metric = q.get("aa_metrics") or {}
    primary = [m for m in q["aa_primary"] if m in per_metric] or list(q["aa_primary"])
    said = str(q["aa_status"])
    if primary:
        said += (f" on its primary metric{'s' if len(primary) > 1 else ''} "
                 f"({tables.join_words(name(m) for m in primary)})")
    groups: dict[str, list[str]] = {}
    for metric, status in per_metric.items():
        if metric not in primary:
            groups.setdefault(str(status), []).append(metric)
    parts = [f"{status} on {texts.number_word(len(metrics))}" + (
        "" if status == "passed" else f" ({tables.join_words(name(m) for m in metrics)})")
        for status, metrics in sorted(groups.items(), key=lambda g: g[0] != "passed")]
    if parts:
        said += f"; on its other metrics {tables.join_words(parts)}"
    return texts.tex(said)


def quality_tex(summaries: list[dict[str, Any]]) -> str:
    """Each campaign's quality: \\studyquality{campaign}{A/A, per metric group}{has A/A}
    {excluded}{values}{findings}{errors}, then its findings as the campaign paper lists
    them."""
    out = []
    for s in summaries:
        q = s["quality"]
        reg = registry(s.get("define_metrics"))
        errors = sum(f["severity"] == "error" for f in q["findings"])
        has_aa = q["aa_status"] != "none"
        out.append(f"\\studyquality{{{texts.tex(s['campaign'])}}}"
                   f"{{{aa_words(q, reg) if has_aa else 'none'}}}{{{int(has_aa)}}}"
                   f"{{{q['excluded']}}}{{{q['n_rows']}}}{{{len(q['findings'])}}}{{{errors}}}")
        if q["findings"]:
            out += ["\\begin{itemize}",
                    *(quality_section.finding_item(f, reg) for f in q["findings"]),
                    "\\end{itemize}"]
    return "\n".join(out) + "\n"


def verdict_cell(r: dict[str, Any]) -> str:
    """The study's verdict; where the campaign's own correction gave another word, both
    (\\verdictpair{study}{campaign}, worded in study.tex)."""
    study, campaign = texts.tex(r["verdict_study"]), texts.tex(r["verdict_campaign"])
    return study if study == campaign else f"\\verdictpair{{{study}}}{{{campaign}}}"


def combined_tex(table: pd.DataFrame, reg: dict[str, Any]) -> str:
    """The study's family, one block of rows per campaign (its name as the block's head)."""
    header = ["Model", "Metric", "Env.", r"$\Delta$ \% [95\,\% CI]", r"MDE \%", "$p$",
              r"\shortstack{$p_\mathrm{BH}$\\campaign}", r"\shortstack{$p_\mathrm{BH}$\\study}",
              r"\shortstack{$p_\mathrm{TOST}$\\own\\study}", "Verdict"]
    rows = []
    for campaign, rows_of in table.groupby("campaign", sort=False):
        rows.append([f"\\multicolumn{{{len(header)}}}{{l}}{{\\textit{{Campaign "
                     f"{texts.tex(campaign)}}}}}"])
        for r in rows_of.to_dict("records"):
            rows.append([tables.code(texts.tex(r["model"])),
                         texts.tex(tables.in_prose(reg.get(r["metric"]), r["metric"])),
                         tables.code(texts.tex(r["environment"])), tables.rel_with_ci(r),
                         tables.num(100 * r["mde_rel"], 2) if pd.notna(r["mde_rel"]) else "--",
                         tables.pval(r["p"]), tables.pval(r["p_bh_campaign"]),
                         tables.pval(r["p_bh_study"]),
                         # the campaign's TOST over the study's (Holm) in one cell
                         f"\\shortstack[r]{{{tables.pval(r['tost_p'])}\\\\"
                         f"{tables.pval(r.get('tost_p_holm_study', math.nan))}}}",
                         verdict_cell(r)])
    return tables.longtable(header, rows, "lL{1.6cm}lrrrrrrL{1.7cm}",
                            "tab:study-combined", colsep="2.5pt")


def data_tex(summaries: list[dict[str, Any]]) -> str:
    header = ["Campaign", "Raw data folder", "Files", "sha256 (raw files, sorted)"]
    rows = [[texts.tex(s["campaign"]), f"\\texttt{{{texts.tex(s['raw_dir'])}}}",
             str(s["raw_files"]),
             "\\newline ".join(f"\\texttt{{{s['raw_sha256'][i:i + 16]}}}"
                               for i in range(0, 64, 16))]
            for s in summaries]
    return tables.longtable(header, rows, "llrL{3cm}", "tab:study-data")


VERDICT_MACRO = {"equivalent": "Equivalent", "overhead": "Overhead", "advantage": "Advantage",
                 "difference": "Difference", "inconclusive": "Inconclusive",
                 "not estimable": "NotEstimable"}


def _names(items: list[str]) -> str:
    return tables.join_words([f"\\texttt{{{texts.tex(i)}}}" for i in items])


def numbers(study: Study, table: pd.DataFrame, alpha: float,
            summaries: list[dict[str, Any]]) -> dict[str, Any]:
    sig_bh = int((table["p_bh_study"] < alpha).sum())
    words = table["verdict_study"].astype(str).str.split(" (", regex=False).str[0]
    margins = sorted({float(s["equivalence_margin"]) for s in summaries})
    with_error = [s["campaign"] for s in summaries
                  if any(f["severity"] == "error" for f in s["quality"]["findings"])]
    aa_failed = [s["campaign"] for s in summaries if s["quality"]["aa_status"] == "failed"]
    excluded = [s["campaign"] for s in summaries if s["quality"]["excluded"] > 0]
    values: dict[str, Any] = {
        "studyName": texts.tex(study.name), "studyDescription": texts.tex(study.description),
        "studyCampaigns": len(study.campaigns),
        "studyFamilySize": int(table["p"].notna().sum()),
        "studyFamilies": texts.tex(", ".join(study.family)), "studyAlpha": alpha,
        "studySignificantBH": sig_bh,
        "studySignificantBonferroni": int((table["p_bonferroni_study"] < alpha).sum()),
        "studyComparisons": len(table),
        "studyVerdictCaveated": int(table["verdict_study"].astype(str).str.contains(
            "(", regex=False).sum()),
        "studyVerdictChanged": int((table["verdict_study"] != table["verdict_campaign"]).sum()),
        "studyOneMargin": len(margins) == 1,
        "studyMarginPct": ", ".join(f"{100 * m:g}" for m in margins) or "--",
        "studyDerived": derived_count(summaries),
        # the methods name the alpha-spending function only where a campaign stopped by one
        "studyStopping": sum(bool(s.get("stopping")) for s in summaries),
        "studyQualityErrors": len(with_error), "studyQualityErrorCampaigns": _names(with_error),
        "studyAAFailed": len(aa_failed), "studyAAFailedCampaigns": _names(aa_failed),
        "studyExcludedCampaigns": len(excluded),
    }
    for word, macro in VERDICT_MACRO.items():
        values[f"studyVerdict{macro}"] = int((words == word).sum())
    shared = shared_factors(summaries)
    for key, (state, value) in shared.items():
        values[f"studyFactor{FACTOR_MACRO[key]}"] = state
        values[f"studyFactor{FACTOR_MACRO[key]}Value"] = texts.tex(value) or "--"
    # a host name shared by campaigns that ran on different GPUs is a name, not a machine
    # (the lent machines are all called 'vm'): said as such, never as a shared host
    values["studyHostNameOnly"] = (shared["host"][0] == 2 and shared["gpu_uuid"][0] != 2)
    if values["studyHostNameOnly"]:
        values["studyFactorHost"] = 0
        shared["host"] = (0, shared["host"][1])
    not_bare = [s for s in summaries if s.get("where")]
    values["studyRefNotBare"] = len(not_bare)
    values["studyRefNotBareCampaigns"] = _names([s["campaign"] for s in not_bare]) or "--"
    # one sentence per distinct set-up, naming its campaigns (two campaigns' set-ups are
    # never fused into one clause)
    where: dict[str, list[str]] = {}
    for s in not_bare:
        where.setdefault(s["where"], []).append(s["campaign"])
    values["studyRefWhere"] = " ".join(
        (f"Its processes ran {w}." if len(where) == 1 else
         f"In {_names(names)} its processes ran {w}.") for w, names in where.items()) or "--"
    values["studyFactorsAll"] = sum(state == 2 for state, _ in shared.values())
    values["studyFactorsSome"] = sum(state == 1 for state, _ in shared.values())
    return values


def write(study: Study, summaries_dir: Path, out_dir: Path) -> pd.DataFrame:
    """study.csv, and the paper's generated parts under out_dir/paper."""
    summaries = [json.loads((summaries_dir / f"{c.name}.json").read_text())
                 for c in study.campaigns]
    for s, c in zip(summaries, study.campaigns, strict=True):
        if s.get("summary_version", 0) != SUMMARY_VERSION:
            raise StudyError(f"{summaries_dir / (c.name + '.json')}: a summary of format "
                             f"{s.get('summary_version', 'before 5')}, this version reads "
                             f"{SUMMARY_VERSION}: run the study workflow (it rewrites a "
                             "summary older than publishing/study.py), or delete it.")
        missing = sorted({"quality", "system", "alpha", "equivalence_margin", "where",
                          "thermal", "why", "findings"} - set(s))
        if missing:
            raise StudyError(f"{summaries_dir / (c.name + '.json')}: no {missing}; it was "
                             "written by an older version: delete it and rerun the study "
                             "workflow.")
    comparisons = {s["campaign"]: pd.read_csv(s["comparisons"]) for s in summaries}
    for s in summaries:  # the analysis read is the analysis the summary hashed
        if file_hash(Path(s["comparisons"])) != s["comparisons_sha256"]:
            raise StudyError(f"{s['comparisons']} changed after its summary was written "
                             "(another run of that campaign's workflow wrote it); the study "
                             "workflow's next run summarises it again (it removes the stale "
                             "summary): run it once more.")
    alphas = {float(s["alpha"]) for s in summaries}
    if len(alphas) != 1:
        raise StudyError(f"{study.source}: the campaigns use different alpha {sorted(alphas)}; "
                         "a study's family needs one.")
    table = combine(study, comparisons, {s["campaign"]: evidence_of(s) for s in summaries})
    records.atomic_write_text(out_dir / R.STUDY_TABLE, table.to_csv(index=False))
    reg: dict[str, Any] = {}
    for s in summaries:
        reg.update(registry(s.get("define_metrics")))
    paper = out_dir / R.STUDY_PAPER
    paper.mkdir(parents=True, exist_ok=True)
    generated, values = paper_parts(study, summaries, table, reg, paper)
    parts = {"numbers.tex": tables.macros({**numbers(study, table, alphas.pop(), summaries),
                                           **values}),
             "design.tex": design_tex(summaries),
             "dependence.tex": dependence_tex(study, summaries),
             "combined.tex": combined_tex(table, reg), "data.tex": data_tex(summaries),
             "system.tex": system_tex(summaries), "quality.tex": quality_tex(summaries)}
    parts.update(generated)
    for name, text in parts.items():
        records.atomic_write_text(paper / name, text)
    return table


def build_pdf(source: Path, build_dir: Path, out: Path) -> None:
    """latexmk on paper/study.tex beside the generated parts."""
    from containertax.publishing.paper import PaperError, failed

    if shutil.which("latexmk") is None:
        raise PaperError("latexmk is missing: apt-get install latexmk texlive-latex-recommended.")
    shutil.copyfile(source, build_dir / "study.tex")
    shutil.copyfile(source.parent / "references.bib", build_dir / "references.bib")
    proc = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                           "study.tex"], cwd=build_dir, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise failed(build_dir, "study", proc.returncode, proc.stdout)
    tmp = out.with_name(out.name + ".partial")
    shutil.copyfile(build_dir / "study.pdf", tmp)
    tmp.replace(out)
    review_pdf(build_dir, out)


def review_pdf(build_dir: Path, pdf: Path) -> list[Any]:
    """What a reviewer would reject in the study's PDF (publishing/review.py, as for a
    campaign's paper), written to review.json beside it."""
    from containertax.publishing import review
    from containertax.statistics.aggregate import COLUMNS
    from containertax.workloads.metric_registry import TELEMETRY

    names = sorted(set(registry()) | set(TELEMETRY) | set(COLUMNS))
    problems = review.review(build_dir, pdf, names, log_name="study.log")
    n = review.read_numbers(build_dir / "numbers.tex").get("studyUnlisted", "0")
    if n != "0":
        problems.append(review.Problem(
            "study-unlisted", "selection", f"{n} campaign(s) beside the included ones are "
            "neither included nor left out (the paper says which): list each under "
            "study.campaigns or study.excluded with its reason"))
    records.write_json(pdf.with_name("review.json"), review.as_dicts(problems))
    return problems


def write_summary(study: Study, name: str, out: str | Path) -> None:
    """The study's record of one campaign's finished analysis (workflow/study.smk)."""
    records.atomic_write_text(Path(out), json.dumps(summarize(study, name), indent=1) + "\n")


# --- the study as a paper: metadata, introduction, figures, findings, threats ----------


def _words(text: Any) -> str:
    return texts.tex(" ".join(str(text or "").split()))


def meta_values(study: Study) -> dict[str, Any]:
    """Title, authors, affiliation, the question and the abstract's lead (study config)."""
    m = study.meta
    authors = [str(a) for a in m.get("authors") or []]
    return {"studyTitle": _words(m.get("title") or f"Container overhead on GPU inference: "
                                 f"study {study.name}"),
            "studyHasAuthors": bool(authors), "studyAuthors": _words(", ".join(authors)),
            "studyAffiliation": _words(m.get("affiliation") or ""),
            "studyHasQuestion": bool(m.get("question")),
            "studyQuestion": _words(m.get("question") or ""),
            "studyHasLead": bool(m.get("abstract_lead")),
            "studyLead": _words(m.get("abstract_lead") or ""),
            "studyHasIntroFile": bool(m.get("introduction_file")),
            "studyHasDiscussionFile": bool(m.get("discussion_file")),
            "studyHasConclusionFile": bool(m.get("conclusion_file")),
            "studyConfigName": texts.tex(Path(study.source).stem),
            "studyUnlisted": len(unlisted(study))}


def unlisted(study: Study) -> list[str]:
    """Campaigns beside the included ones (a folder of raw records under the same results
    folder) that the study config neither includes nor leaves out: the inclusion rule lists
    every campaign it could have pooled, so a campaign added later is not silently out."""
    from containertax.campaign.paths import RAW_DIR

    listed = {c.name for c in study.campaigns} | {
        str(e.get("name")) for e in study.meta.get("excluded") or []}
    parents = {Path(c.campaign.root).parent for c in study.campaigns
               if c.campaign is not None}  # None: summaries only
    return sorted(d.name for parent in parents if parent.is_dir() for d in parent.iterdir()
                  if (d / RAW_DIR).is_dir() and d.name not in listed)


def selection_tex(study: Study, summaries: list[dict[str, Any]]) -> str:
    """Which campaigns the study includes and why, which it leaves out and why (the study
    config's words), and any campaign beside them that it does not list (unlisted)."""
    inc = [f"\\item \\texttt{{{texts.tex(s['campaign'])}}}: "
           f"{_words(s.get('why')) or 'no reason given in the study configuration'}"
           for s in summaries]
    out = ["\\begin{itemize}", *inc, "\\end{itemize}"]
    left = study.meta.get("excluded") or []
    if left:
        out += ["Left out:", "\\begin{itemize}",
                *(f"\\item \\texttt{{{texts.tex(e['name'])}}}: {_words(e['why'])}"
                  for e in left), "\\end{itemize}"]
    missed = unlisted(study)
    if missed:
        out.append("Neither included nor left out (the study configuration does not list "
                   + ("it" if len(missed) == 1 else "them") + "): "
                   + ", ".join(f"\\texttt{{{texts.tex(n)}}}" for n in missed) + ".")
    return "\n".join(out) + "\n"


def prior_tex(study: Study, table: pd.DataFrame) -> tuple[str, int]:
    """The prior results the study answers (resources/prior_work.yaml, by the study's
    prior_work ids): a table body of citation, setting and result."""
    from containertax.publishing import discussion

    ids = list(study.meta.get("prior_work") or [])
    if not ids:
        return "", 0
    prior = discussion.read_prior_work()
    unknown = [i for i in ids if i not in prior]
    if unknown:
        raise StudyError(f"{study.source}: key 'study.prior_work': {', '.join(unknown)} not in "
                         "the prior-work table; add the result there (with its source) or "
                         "remove the id.")
    rows = [f"\\citet{{{prior[i]['cite']}}} & {_words(prior[i]['setting'])} & "
            f"{_words(prior[i]['result'])} \\\\" for i in ids]
    return " ".join(rows), len(ids)  # one line: numbers.tex is read by line


def forest_figure(table: pd.DataFrame, reg: dict[str, Any], margin: float, path: Path) -> bool:
    """Every comparison of the study's family: its estimate and interval (as printed in
    Table~\\ref{tab:study-combined}) against the equivalence band."""
    from containertax.publishing import figures

    if table.empty:
        return False
    rows = table.to_dict("records")
    envs = sorted({str(r["environment"]) for r in rows})
    one = len(envs) == 1  # the environment then goes once into the axis label
    # two lines a row (campaign and model, then what was compared): one line took half the
    # width and left the intervals a narrow strip
    labels = [f"{r['campaign']}: {r['model']}\n"
              + ("" if one else f"{r['environment']}, ")
              + tables.in_prose(reg.get(r["metric"]), r["metric"]) for r in rows]
    values = []
    for r in rows:
        est, low, high = (t.strip("$").replace("{", "").replace("}", "")
                          for t in tables.rel_texts(r))
        text = f"{est} [{low}, {high}]" if "--" not in (low, high) else est
        values.append(text.replace("-", "\u2212"))  # a minus, as the tables set it
    xlabel = (f"Relative difference of {envs[0]} from its reference (%)" if one
              else "Relative difference (%)")
    return figures.forest(table, labels, margin, path, values, xlabel)


def paired_figures(study: Study, out_dir: Path) -> list[tuple[str, str, bool]]:
    """Each campaign's primary comparisons per block (its paper's paired figure, drawn from
    its kept runs and comparisons): (campaign, figure file name)."""
    from containertax.publishing import discussion, figures
    from containertax.statistics import policy

    made = []
    for entry in study.campaigns:
        c = entry.campaign
        if c is None or c.is_import or not c.paths.kept.is_file():  # None: summaries only
            continue
        runs = pd.read_csv(c.paths.kept)
        runs["model"] = runs["model"].astype(str)
        results = pd.read_csv(c.paths.comparisons)
        results["model"] = results["model"].astype(str)
        primary = policy.primary_metrics(c, runs)
        pairs = [(m, metric) for m, metrics in primary.items() for metric in metrics]
        reg = registry(c.analysis.get("define_metrics"))
        rows = discussion.paired_rows(
            c, runs, results, pairs, True,
            lambda m, e, metric, reg=reg: f"{m}, {e}: {tables.in_prose(reg.get(metric), metric)}")
        name = f"paired-{entry.name}.pdf"
        if rows and figures.paired_differences(
                rows, "Difference per block, container against reference (%)",
                out_dir / name):
            made.append((entry.name, name, bool(c.replicas)))
    return made


def figures_tex(forest: bool, paired: list[tuple[str, str, bool]]) -> str:
    out = []
    if forest:
        out.append("\\begin{figure}[tbp]\\centering\\includegraphics{forest.pdf}\n"
                   "\\caption{\\studyforestcaption}\\label{fig:study-forest}\\end{figure}")
    for campaign, name, aa in paired:
        out.append(f"\\begin{{figure}}[tbp]\\centering\\includegraphics{{{name}}}\n"
                   f"\\caption{{\\studypairedcaption{{{texts.tex(campaign)}}}"
                   f"{{{int(aa)}}}}}"
                   f"\\label{{fig:study-paired-{campaign}}}\\end{{figure}}")
    return "\n".join(out) + "\n"


def findings_tex(table: pd.DataFrame, reg: dict[str, Any]) -> tuple[str, int]:
    """The findings rule over the study's family: every claim (a verdict other than
    inconclusive and not estimable) with its interval, as an item."""
    items = []
    for r in table.to_dict("records"):
        word = str(r["verdict_study"]).split(" (", 1)[0]
        if word in ("inconclusive", "not estimable"):
            continue
        est, low, high = tables.rel_texts(r)
        items.append(f"\\item \\texttt{{{texts.tex(r['campaign'])}}}, "
                     f"{texts.tex(r['model'])} in {texts.tex(r['environment'])}, "
                     f"{texts.tex(tables.in_prose(reg.get(r['metric']), r['metric']))}: "
                     f"{est}\\,\\% [{low}, {high}], {texts.tex(r['verdict_study'])}")
    return "\n".join(items) + "\n", len(items)


def _beyond_groups(study: Study, summaries: list[dict[str, Any]]
                   ) -> dict[tuple[str, str, str, str, str], list[tuple[str, str, float]]]:
    """The campaigns' abstract findings beyond the family, grouped by metric (its id and its
    words), family (id and words) and verdict: (campaign, printed estimate, relative)."""
    from containertax.statistics import findings as fd

    groups: dict[tuple[str, str, str, str, str], list[tuple[str, str, float]]] = {}
    for s in summaries:
        text_columns = ("text_est", "verdict")
        table = pd.read_csv(s["findings"], dtype=dict.fromkeys(text_columns, str))
        if table.empty:
            continue
        table = table[(table["reach"] == fd.ABSTRACT) & ~table["family"].isin(study.family)
                      & (table["kind"] == "comparison")]
        reg = registry(s.get("define_metrics"))
        for r in table.to_dict("records"):
            key = (str(r["metric"]), tables.in_prose(reg.get(r["metric"]), r["metric"]),
                   str(r["family"]), fd.FAMILY_WORDS.get(r["family"], r["family"]),
                   str(r["verdict"]))
            groups.setdefault(key, []).append((s["campaign"], str(r["text_est"]),
                                               float(r.get("rel_overhead", math.nan))))
    for found in groups.values():
        found.sort(key=lambda x: x[2])
    return groups


def beyond_summary(study: Study, summaries: list[dict[str, Any]]) -> str:
    """The campaigns' findings beyond the family for the abstract, grouped by metric, family
    and verdict: 'start-up latency (secondary): overhead in 6 comparisons of 3 campaigns,
    $+204.0$ to $+262.2$\\,\\%' (each estimate as its campaign paper prints it)."""
    parts = []
    for (_, metric, _, family, verdict), found in _beyond_groups(study, summaries).items():
        n, campaigns = len(found), len({c for c, _, _ in found})
        where = (f" in {n} comparisons of {campaigns} campaigns" if campaigns > 1 else
                 f" in {n} comparisons" if n > 1 else "")
        size = (f"${found[0][1]}$\\,\\%" if n == 1 else
                f"${found[0][1]}$ to ${found[-1][1]}$\\,\\%")
        parts.append(f"{texts.tex(metric)} ({texts.tex(family)}): {texts.tex(verdict)}"
                     f"{where}, {size}")
    return "; ".join(parts)


def beyond_values(study: Study, summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Each group of beyond_summary as values an author's text can print and expect
    (\\ctx{studyBeyond/METRIC/FAMILY/VERDICT/n}, .../campaigns, .../low, .../high; ids as
    in the campaigns' tables, e.g. studyBeyond/startup_s/secondary/overhead/n)."""
    out: dict[str, Any] = {}
    for (metric, _, family, _, verdict), found in _beyond_groups(study, summaries).items():
        key = f"studyBeyond/{metric}/{family}/{verdict}".replace(" ", "-")
        out[f"{key}/n"] = len(found)
        out[f"{key}/campaigns"] = len({c for c, _, _ in found})
        out[f"{key}/low"], out[f"{key}/high"] = found[0][1], found[-1][1]
    return out


def campaign_findings_tex(study: Study, summaries: list[dict[str, Any]]) -> tuple[str, int]:
    """Beyond the study's family: what each campaign's findings rule brought to its own
    abstract (stats/findings.csv, reach 'abstract', not in the pooled families), each with
    the text its campaign paper prints."""
    from containertax.statistics import findings as fd

    items = []
    for s in summaries:
        text_columns = ("text_est", "text_low", "text_high", "verdict")
        table = pd.read_csv(s["findings"], dtype=dict.fromkeys(text_columns, str))
        if table.empty:
            continue
        table = table[(table["reach"] == fd.ABSTRACT) & ~table["family"].isin(study.family)]
        reg = registry(s.get("define_metrics"))
        name = s["campaign"]
        for r in table.to_dict("records"):
            what = texts.tex(tables.in_prose(reg.get(r.get("metric")), str(r.get("metric"))))
            if r.get("kind") == "quality":
                items.append(f"\\item \\texttt{{{texts.tex(name)}}}, "
                             f"{texts.tex(r.get('model') or '')} {what}: "
                             f"{texts.tex(str(r.get('check', '')).replace('_', ' '))}"
                             + (f", ${r['text_est']}$\\,\\% of the mean across the observed "
                                "range" if isinstance(r.get("text_est"), str) else ""))
                continue
            est, low, high = tables.rel_texts(r)
            items.append(f"\\item \\texttt{{{texts.tex(name)}}}, "
                         f"{texts.tex(r['model'])} in {texts.tex(r['environment'])}, "
                         f"{what} ({texts.tex(fd.FAMILY_WORDS.get(r['family'], r['family']))}"
                         f"): {est}\\,\\% [{low}, {high}], "
                         f"{texts.tex(r.get('verdict', ''))}")
    return "\n".join(items) + "\n", len(items)


def threats_tex(summaries: list[dict[str, Any]]) -> str:
    """The campaigns' threats pooled, each stated once with the campaigns it concerns."""
    items = []

    def names(xs: list[str]) -> str:
        return tables.join_words([f"\\texttt{{{texts.tex(x)}}}" for x in xs])

    where: dict[str, list[str]] = {}
    for s in summaries:
        if s.get("where"):
            where.setdefault(s["where"], []).append(s["campaign"])
    if where:  # one paragraph: campaigns whose reference ran alike together
        every = [c for cs in where.values() for c in cs]
        ran = " ".join(f"In {names(cs)} its processes ran {words}." for words, cs in where.items())
        items.append("\\item[What the reference was.] The reference was not bare metal in "
                     f"{names(every)}. {ran} ``Native'' means that set-up; on bare metal both "
                     "sides may differ.")
    thermal = [s["campaign"] for s in summaries if s.get("thermal")]
    if thermal:
        counts = "; ".join(f"\\texttt{{{texts.tex(s['campaign'])}}}: "
                           f"{len(s['thermal'])}" for s in summaries if s.get("thermal"))
        items.append("\\item[Thermal state.] The gate did not remove every dependence on the "
                     "thermal state: metrics that depend significantly on the start "
                     "temperature or the time since the last run, per campaign, " + counts
                     + ". The counterbalanced order balances them over the environments only "
                     "in expectation.")
    facts = {s["campaign"]: s.get("threats") or {} for s in summaries}
    clocks = [(c, f["clocks"]) for c, f in facts.items() if f.get("clocks")]
    if clocks:
        items.append("\\item[Clocks lowered while measuring.] NVML reported the GPU's clocks "
                     "lowered inside the measured windows: " + "; ".join(
                         f"in \\texttt{{{texts.tex(c)}}}, {words}" for c, words in clocks)
                     + ". The numbers hold at these clocks, not at the GPU's full clocks.")
    hosted = [c for c, f in facts.items() if f.get("host_dirs")]
    if hosted:
        dirs = sorted({facts[c]["host_dirs"] for c in hosted})
        items.append(f"\\item[What the container isolates.] In {names(hosted)} the container "
                     f"runs the host's own software ({'; '.join(dirs)} from the host), so the "
                     "comparison isolates namespaces and cgroups; a container with its own "
                     "CUDA and framework builds would add the difference of those builds.")
    random = [c for c, f in facts.items() if f.get("random_weights")]
    if random:
        items.append(f"\\item[Random weights.] In {names(random)} the language models ran "
                     "with random weights and a fixed number of output tokens; loading real "
                     "checkpoints would add file-system traffic that these designs do not "
                     "measure.")
    several = [(c, f["n_gpus"], f.get("blocks_split")) for c, f in facts.items()
               if f.get("n_gpus", 0) > 1]
    if several:
        items.append("\\item[Several GPUs.] " + "; ".join(
            f"\\texttt{{{texts.tex(c)}}} ran its blocks on {n} GPUs"
            + (", and at least one block was split between GPUs" if split else "")
            for c, n, split in several) + ": a GPU's own speed is part of the noise, and of a "
            "comparison's difference wherever a block was split.")
    images = [(s["campaign"], len(s["system"].get("image_id", [])),
               len(s["system"].get("image", []))) for s in summaries
              if len(s["system"].get("image_id", [])) > 1]
    if images:
        items.append("\\item[Image ids.] In " + "; in ".join(
            f"\\texttt{{{texts.tex(c)}}} the container "
            + (f"image kept its name but took {n} ids" if names_ == 1 else f"images had {n} ids")
            + " over the runs" for c, n, names_ in images) + ": a difference between those "
            "images would be confounded with the blocks that used each.")
    aa = [s["campaign"] for s in summaries if s["quality"]["aa_status"] == "none"]
    if aa:
        items.append(f"\\item[No A/A control.] {names(aa)} ran no A/A replica, so the "
                     "instrument's false-positive rate was not checked there.")
    unresolved = [s["campaign"] for s in summaries
                  if any(v in ("inconclusive", "cannot fail")
                         for v in s["quality"]["aa_metrics"].values())]
    if unresolved:
        items.append(f"\\item[Resolution not shown.] In {names(unresolved)} the A/A control "
                     "did not show the declared resolution on some metric; every verdict on "
                     "such a metric carries that caveat.")
    items.append("\\item[Workloads and machines.] The workloads and machines are those of "
                 "Section~\\ref{sec:study-methods}; others may behave differently.")
    return "\\begin{description}\n" + "\n".join(items) + "\n\\end{description}\n"


def paper_parts(study: Study, summaries: list[dict[str, Any]], table: pd.DataFrame,
                reg: dict[str, Any], paper: Path) -> tuple[dict[str, str], dict[str, Any]]:
    """The study paper's generated parts besides the tables (figures drawn into paper/)."""
    margins = sorted({float(s["equivalence_margin"]) for s in summaries})
    forest = forest_figure(table, reg, margins[0] if margins else 0.05, paper / "forest.pdf")
    paired = paired_figures(study, paper)
    prior_rows, n_prior = prior_tex(study, table)
    found, n_found = findings_tex(table, reg)
    beyond, n_beyond = campaign_findings_tex(study, summaries)
    for key, name in AUTHOR_FILES.items():
        text = Path(study.meta[key]).read_text() if study.meta.get(key) else ""
        records.atomic_write_text(paper / name, text)
    return {"selection.tex": selection_tex(study, summaries),
            "figures.tex": figures_tex(forest, paired), "findings.tex": found,
            "threats.tex": threats_tex(summaries), "beyond.tex": beyond}, {
                "studyBeyondCount": n_beyond,
                "studyBeyondSummary": beyond_summary(study, summaries) or "--",
                **beyond_values(study, summaries),
                **meta_values(study), "studyPriorCount": n_prior,
                "studyPriorRows": prior_rows or "--",
                "studyFindingCount": n_found, "studyHasForest": forest,
                "studyPairedCount": len(paired)}
