"""A study: several campaigns analysed as one (config `study:`), from their raw records only.

Each campaign is analysed by its own workflow (quality, statistics, correction within its
families: stats/comparisons.csv); the study takes the comparisons of its declared family
(`study.family`: the campaigns' family names whose tests it pools, by default the primary
family), corrects them again as ONE family with the per-campaign routine
(analysis/correction.py: Bonferroni and Benjamini-Hochberg), and cites each campaign's raw
data by folder and a content hash (sha256 over its sorted raw files). Where a campaign's
environment takes options derived from another campaign's analysis (`derived_from`, phase
2B -> 2C/2D), the dependence is stated from the derived file, not from the config's words.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from containertax.analysis import correction, tables
from containertax.campaign import config as ct_config
from containertax.campaign import paths as R
from containertax.core import records
from containertax.workloads.metric_registry import registry


class StudyError(ct_config.ConfigError):
    """A study config or its inputs that cannot be used; the message names file and key."""


@dataclass(frozen=True)
class StudyCampaign:
    name: str
    config: Path  # the campaign's config file, as the study names it (relative to cwd)
    campaign: ct_config.Campaign


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    source: str
    campaigns: tuple[StudyCampaign, ...]
    family: tuple[str, ...]
    run_cells: bool
    root: Path

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
    allowed = {"name", "description", "campaigns", "family", "run_cells"}
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
        if not isinstance(entry, dict) or set(entry) != {"name", "config"}:
            raise StudyError(f"{where}': give '{{name: NAME, config: FILE}}', got {entry!r}.")
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
        campaigns.append(StudyCampaign(campaign.name, Path(_relative(path)), campaign))
    names = [c.name for c in campaigns]
    if len(set(names)) != len(names):
        raise StudyError(f"{source}: key 'study.campaigns' names a campaign twice: {names}.")
    results_dir = Path(workdir) / str(data.get("results_dir", "results"))
    return Study(name, str(spec.get("description", "")), source, tuple(campaigns),
                 tuple(family), bool(spec.get("run_cells", False)),
                 R.study_root(results_dir, name))


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
    """sha256 over the campaign's raw files (path relative to raw/ and content, in sorted
    order; files moved aside under raw/.<why>/ left out) and how many files it covers:
    the same records give the same hash on any machine."""
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


def summarize(study: Study, name: str) -> dict[str, Any]:
    """One campaign's entry of the study: its design, its data's hash, its comparisons."""
    entry = study.campaign(name)
    c = entry.campaign
    digest, n_files = raw_hash(c.root)
    comparisons = c.paths.comparisons
    if not comparisons.is_file():
        raise StudyError(f"{comparisons} does not exist: campaign {name}'s analysis has not "
                         f"run (snakemake --configfile {entry.config} paper).")
    return {
        "campaign": name, "config": str(entry.config), "description": c.raw.get("description", ""),
        "raw_dir": str(c.root / "raw"), "raw_sha256": digest, "raw_files": n_files,
        "records": len(c.paths.raw_records()),
        "models": [m.id for m in c.models], "environments": [e.id for e in c.environments],
        "reference": c.reference, "repetitions": c.repetitions,
        "workloads": sorted({c.workload_kind(m.id) for m in c.models}),
        "comparisons": str(comparisons), "comparisons_sha256": file_hash(comparisons),
        "options": {e.id: e.spec.get("options_source") for e in c.environments
                    if e.spec.get("options_source")},
    }


COLUMNS = ["campaign", "model", "metric", "environment", "reference", "campaign_family",
           "n_blocks", "rel_overhead", "rel_ci_low", "rel_ci_high", "p",
           "p_bonferroni_campaign", "p_bh_campaign"]


def combine(study: Study, comparisons: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The study's family: every campaign's comparisons in the declared families, corrected
    together (correction.correct over one family; the per-campaign adjustments kept)."""
    frames = []
    for entry in study.campaigns:
        frame = comparisons[entry.name]
        if "family" not in frame:
            raise StudyError(f"{entry.campaign.paths.comparisons}: no 'family' column; rebuild "
                             "the campaign's analysis.")
        mine = frame[frame["family"].isin(study.family)].copy()
        mine.insert(0, "campaign", entry.name)
        mine = mine.rename(columns={"family": "campaign_family",
                                    "p_bonferroni": "p_bonferroni_campaign",
                                    "p_bh": "p_bh_campaign"})
        frames.append(mine.reindex(columns=COLUMNS))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    out = correction.correct(table.assign(family="study"))
    return out.rename(columns={"family": "study_family", "p_bonferroni": "p_bonferroni_study",
                               "p_bh": "p_bh_study", "family_size": "study_family_size"})


# --- LaTeX parts -----------------------------------------------------------------------

def _list(items: list[str]) -> str:
    return ", ".join(tables.code(tables.tex(i)) for i in items)


def design_tex(summaries: list[dict[str, Any]]) -> str:
    """One subsection per campaign: what it compared, on what, how often."""
    out = []
    for s in summaries:
        out.append(f"\\subsection{{Campaign {tables.code(tables.tex(s['campaign']))}}}\n"
                   f"{tables.tex(s['description'])}.\n"
                   f"Config: \\texttt{{{tables.tex(s['config'])}}}. "
                   f"Models: {_list(s['models'])}. Environments: {_list(s['environments'])}, "
                   f"each compared with {tables.code(tables.tex(s['reference']))}. "
                   f"Workload kinds: {_list(s['workloads'])}. "
                   f"{s['repetitions']} repetitions (blocks); {s['records']} raw records.\n")
        for env, src in s["options"].items():
            out.append(options_sentence(env, src) + "\n")
    return "\n".join(out)


def options_sentence(env: str, src: dict[str, Any]) -> str:
    opts = ", ".join(f"{k}={v}" for k, v in (src.get("options") or {}).items()) or "none"
    if src.get("kind") == "derived":
        return (f"The options of {tables.code(tables.tex(env))} ({tables.tex(opts)}) were "
                f"derived from campaign {tables.code(tables.tex(src['campaign']))}'s analysis "
                f"(\\texttt{{{tables.tex(src['file'])}}}, sha256 "
                f"\\texttt{{{src['sha256'][:16]}}}; qualifying variants: "
                f"{_list(src.get('qualifying') or ['none'])}).")
    return (f"The options of {tables.code(tables.tex(env))} ({tables.tex(opts)}) were "
            "declared by hand, not derived from a campaign's analysis.")


def dependence_tex(study: Study, summaries: list[dict[str, Any]]) -> str:
    """Which campaign's analysis fed which campaign's design, from the derived files."""
    lines = []
    for s in summaries:
        for env, src in s["options"].items():
            if src.get("kind") == "derived":
                lines.append(f"Campaign {tables.code(tables.tex(s['campaign']))} depends on "
                             f"{tables.code(tables.tex(src['campaign']))}: "
                             + options_sentence(env, src))
    if not lines:
        return ("The campaigns are independent: none uses options derived from another "
                "campaign's analysis, so their comparisons are pooled as separate "
                "experiments.\n")
    return "\n\n".join(lines) + "\n"


def combined_tex(table: pd.DataFrame, reg: dict[str, Any]) -> str:
    """The study's family, one block of rows per campaign (its name as the block's head)."""
    header = ["Model", "Metric", "Env.", r"$\Delta$ \% [95\% CI]", "$p$",
              r"\shortstack{$p_\mathrm{BH}$\\campaign}", r"\shortstack{$p_\mathrm{Bonf}$\\study}",
              r"\shortstack{$p_\mathrm{BH}$\\study}"]
    rows = []
    for campaign, rows_of in table.groupby("campaign", sort=False):
        rows.append([f"\\multicolumn{{8}}{{l}}{{\\textit{{Campaign "
                     f"{tables.tex(campaign)}}}}}"])
        for r in rows_of.to_dict("records"):
            rows.append([tables.code(tables.tex(r["model"])),
                         tables.tex(tables.in_prose(reg.get(r["metric"]), r["metric"])),
                         tables.code(tables.tex(r["environment"])), tables.rel_with_ci(r),
                         tables.pval(r["p"]), tables.pval(r["p_bh_campaign"]),
                         tables.pval(r["p_bonferroni_study"]), tables.pval(r["p_bh_study"])])
    return tables.longtable(header, rows, "lL{3.6cm}llrrrr", "tab:study-combined")


def data_tex(summaries: list[dict[str, Any]]) -> str:
    header = ["Campaign", "Raw data folder", "Files", "sha256 (raw files, sorted)"]
    rows = [[tables.tex(s["campaign"]), f"\\texttt{{{tables.tex(s['raw_dir'])}}}",
             str(s["raw_files"]),
             f"\\texttt{{{s['raw_sha256'][:32]}}}\\newline\\texttt{{{s['raw_sha256'][32:]}}}"]
            for s in summaries]
    return tables.longtable(header, rows, "llrL{5cm}", "tab:study-data")


def numbers(study: Study, table: pd.DataFrame, alpha: float) -> dict[str, Any]:
    sig_bh = int((table["p_bh_study"] < alpha).sum())
    return {"studyName": tables.tex(study.name), "studyDescription": tables.tex(study.description),
            "studyCampaigns": len(study.campaigns),
            "studyFamilySize": int(table["p"].notna().sum()),
            "studyFamilies": tables.tex(", ".join(study.family)), "studyAlpha": alpha,
            "studySignificantBH": sig_bh,
            "studySignificantBonferroni": int((table["p_bonferroni_study"] < alpha).sum())}


def write(study: Study, summaries_dir: Path, out_dir: Path) -> pd.DataFrame:
    """study.csv, and the paper's generated parts under out_dir/paper."""
    summaries = [json.loads((summaries_dir / f"{c.name}.json").read_text())
                 for c in study.campaigns]
    comparisons = {s["campaign"]: pd.read_csv(s["comparisons"]) for s in summaries}
    for s in summaries:  # the analysis read is the analysis the summary hashed
        if file_hash(Path(s["comparisons"])) != s["comparisons_sha256"]:
            raise StudyError(f"{s['comparisons']} changed after its summary was written; "
                             "rerun the study workflow.")
    table = combine(study, comparisons)
    records.atomic_write_text(out_dir / R.STUDY_TABLE, table.to_csv(index=False))
    alphas = {c.campaign.analysis["alpha"] for c in study.campaigns}
    if len(alphas) != 1:
        raise StudyError(f"{study.source}: the campaigns use different alpha {sorted(alphas)}; "
                         "a study's family needs one.")
    reg: dict[str, Any] = {}
    for c in study.campaigns:
        reg.update(registry(c.campaign.analysis.get("define_metrics")))
    paper = out_dir / R.STUDY_PAPER
    paper.mkdir(parents=True, exist_ok=True)
    parts = {"numbers.tex": tables.macros(numbers(study, table, alphas.pop())),
             "design.tex": design_tex(summaries),
             "dependence.tex": dependence_tex(study, summaries),
             "combined.tex": combined_tex(table, reg), "data.tex": data_tex(summaries)}
    for name, text in parts.items():
        records.atomic_write_text(paper / name, text)
    return table


def build_pdf(source: Path, build_dir: Path, out: Path) -> None:
    """latexmk on paper/study.tex beside the generated parts."""
    from containertax.analysis.paper import PaperError

    if shutil.which("latexmk") is None:
        raise PaperError("latexmk is missing: apt-get install latexmk texlive-latex-recommended.")
    shutil.copyfile(source, build_dir / "study.tex")
    proc = subprocess.run(["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error",
                           "study.tex"], cwd=build_dir, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        log = build_dir / "study.log"
        tail = log.read_text(errors="replace")[-3000:] if log.exists() else proc.stdout[-3000:]
        raise PaperError(f"latexmk failed in {build_dir} (status {proc.returncode}):\n{tail}")
    tmp = out.with_name(out.name + ".partial")
    shutil.copyfile(build_dir / "study.pdf", tmp)
    tmp.replace(out)


def write_summary(study: Study, name: str, out: str | Path) -> None:
    """The study's record of one campaign's finished analysis (workflow/study.smk)."""
    records.atomic_write_text(Path(out), json.dumps(summarize(study, name), indent=1) + "\n")
