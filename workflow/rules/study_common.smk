# A study's shared state: the study config, its campaigns, the derived options refreshed
# before the DAG is built, and the rules' input functions (workflow/study.smk).
import json
import re
import shlex
import sys
from pathlib import Path

# the checkout (or the installed package's share/): the Snakefile's folder, which includes
# this file, or workflow/'s parent when this file is run itself (-s workflow/study.smk)
REPO = Path(workflow.basedir)
if not (REPO / "Snakefile").is_file():
    REPO = REPO.parent
sys.path.insert(0, str(REPO / "src"))

from containertax.campaign import paths as R
from containertax.campaign import optimisation as ct_optimisation
from containertax.campaign import integrity as ct_integrity
from containertax.core import packaged as ct_packaged
from containertax.campaign import quantise as ct_quantise
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

CLI_CONFIGS = list(workflow.overwrite_configfiles or [])
if not CLI_CONFIGS and not config.get("study"):
    raise WorkflowError(
        "workflow/study.smk needs a study config: --configfile config/study-h100.yaml"
    )
# without --configfile: the Snakefile's default study
STUDY_SOURCE = str(CLI_CONFIGS[-1]) if CLI_CONFIGS else "config/study-spark.yaml"
try:
    from containertax.publishing import study as ct_study

    STUDY = ct_study.load(config, STUDY_SOURCE)
except ValueError as exc:  # StudyError and ConfigError are ValueErrors
    raise WorkflowError(str(exc)) from None

OUT = STUDY.root
CAMPAIGNS = {c.name: c for c in STUDY.campaigns}
PY = shlex.quote(sys.executable)
# the steps import this checkout's package, whichever one the interpreter has installed
ENV = (
    f"export PYTHONPATH={shlex.quote(str(REPO / 'src'))}${{PYTHONPATH:+:$PYTHONPATH}};"
)


def planning_only():
    from snakemake.cli import get_argument_parser

    args, _ = get_argument_parser().parse_known_args(sys.argv[1:])
    return bool(
        args.dryrun
        or args.lint
        or args.dag
        or args.rulegraph
        or args.summary
        or args.unlock
        or args.cleanup_metadata
    )


# Checkpoints no one publishes, made once before the first campaign that reads them
# (rules/quantise.smk): the same folders each campaign's own workflow would make, so its
# nested run finds them done. One machine: where the study runs cells, a campaign (its
# measured runs), a download and a quantisation each take it whole, whatever --cores says
# (a study of analyses only runs its campaigns side by side).
QUANTISE_OF = {
    c.name: (
        {}
        if c.campaign.is_import or not STUDY.run_cells
        else ct_quantise.jobs(c.campaign)
    )
    for c in STUDY.campaigns
}
QUANTISE = {d: j for jobs in QUANTISE_OF.values() for d, j in jobs.items()}
QUANTISE_CT = f"{ENV} {PY} -m containertax"
MACHINE = {"machine": 1} if STUDY.run_cells else {}
workflow.register_resource("machine", 1)


def quantised_inputs(wildcards):
    """The markers of the checkpoints this campaign's runs read and the study makes."""
    return [job.marker for job in QUANTISE_OF[wildcards.campaign].values()]


# Options a campaign derives for another (phase 2B -> 2C, 2D): refreshed from the deriving
# campaign's analysis before the DAG is built, and rewritten only when their content
# changes, so that the campaigns using them rerun exactly then (mtime rerun triggers).
DERIVED = {}  # derived file -> (deriving campaign's config, environment)
for _c in STUDY.campaigns:
    for _src in ct_study.derived_sources(_c.campaign):
        DERIVED[_src["file"]] = (_src["config"], _src["environment"])
if not planning_only():
    for _file, (_cfg, _env) in DERIVED.items():
        ct_optimisation.refresh_derived(Path(_cfg), _env)
else:
    # a plan shows each campaign's own cells, which its nested workflow runs: the study's
    # jobs below are one per campaign
    from containertax.campaign import schedule as ct_schedule

    for _c in STUDY.campaigns:
        _cc = _c.campaign
        _what = (
            f"{len(_cc.models)} model(s) x {len(_cc.environments)} environment(s) x "
            f"{_cc.repetitions} repetitions = {len(ct_schedule.plan(_cc))} cells"
            if STUDY.run_cells and not _cc.is_import
            else "its analysis only"
        )
        _after = "".join(
            f", after {s['campaign']}'s analysis derives {s['environment']}'s options"
            for s in ct_study.derived_sources(_cc)
        )
        print(
            f"study {STUDY.name}: campaign {_c.name} ({_c.config}): {_what}{_after}",
            file=sys.stderr,
        )
    for _job in QUANTISE.values():
        print(
            f"study {STUDY.name}: {_job.model} quantised once into {_job.dest} "
            f"(rules fetch_base, quantise; log {_job.log}) before the campaigns that read it",
            file=sys.stderr,
        )


# editing the study's analysis code rebuilds its tables (mtime rerun triggers)
SUMMARY_CODE = str(ct_packaged.package() / "publishing" / "study.py")
STUDY_CODE = [
    str(ct_packaged.package() / layer / f"{m}.py")
    for layer, m in (
        ("publishing", "study"),
        ("publishing", "tables"),
        ("statistics", "correction"),
        ("workloads", "metric_registry"),
    )
]


# the author's own text files (study.introduction_file, discussion_file, conclusion_file):
# editing one rebuilds the paper
AUTHORED = [STUDY.meta[key] for key in ct_study.AUTHOR_FILES if STUDY.meta.get(key)]


def study_path(template, **fill):
    return str(OUT / (template.format(**fill) if fill else template))


def derived_inputs(wildcards):
    """The derived option files this campaign's environments take."""
    return [
        s["file"]
        for s in ct_study.derived_sources(CAMPAIGNS[wildcards.campaign].campaign)
    ]


def deriving_campaign(wildcards):
    """The summary of the campaign whose analysis derives this file (existence only: the
    file's content, refreshed before the DAG is built, decides what reruns)."""
    cfg, _ = DERIVED[wildcards.derived]
    name = next(
        c.name
        for c in STUDY.campaigns
        if Path(c.config).resolve() == Path(cfg).resolve()
    )
    return ancient(study_path(R.STUDY_CAMPAIGN, campaign=name))


def raw_folders(wildcards):
    """The campaign's raw record folders and records: a new or removed record changes a
    folder's mtime, a record changed in place its own."""
    paths = CAMPAIGNS[wildcards.campaign].campaign.paths
    raw = paths.raw_dir
    folders = (
        sorted(str(p) for p in raw.glob("*/*") if p.is_dir()) if raw.is_dir() else []
    )
    return folders + [str(p) for p in paths.raw_records()]


# A campaign whose comparisons.csv changed after the study summarised it (another run of
# its workflow wrote it) is summarised again: when jobs run its stale summary is removed
# (a dry run names it), so the study never loops on "changed after its summary".
def stale_summary(name):
    summary = Path(study_path(R.STUDY_CAMPAIGN, campaign=name))
    try:
        data = json.loads(summary.read_text())
        comparisons = Path(data["comparisons"])
        return (
            summary
            if ct_study.file_hash(comparisons) != data["comparisons_sha256"]
            else None
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # no summary yet, or not one to compare: the rule decides


for _name in CAMPAIGNS:
    _stale = stale_summary(_name)
    if _stale is None:
        continue
    if planning_only():
        logger.warning(
            f"campaign {_name}: its comparisons.csv changed after {_stale} was written; "
            "the next run of the study summarises it again."
        )
    else:
        _stale.unlink()
        logger.warning(
            f"campaign {_name}: its comparisons.csv changed after {_stale} was written; "
            "summarising it again."
        )


# The study sees what the campaigns see: each campaign's records are checked by content as
# its own workflow checks them (campaign/integrity.py), so a record damaged in place after
# the study was built stops the study naming it and the fix.
for _c in STUDY.campaigns:
    if _c.campaign.is_import:
        continue
    _damaged, _ = ct_integrity.check_records(
        _c.campaign.paths,
        [str(p) for p in _c.campaign.paths.raw_records()],
        write_cache=not planning_only(),
    )
    if _damaged:
        raise WorkflowError(
            f"campaign {_c.name} ({_c.config}): "
            + ct_integrity.damaged_message(_c.campaign.paths, _damaged)
        )
