# A study: several campaigns as one workflow and one paper (config `study:`, e.g.
# config/study-h100.yaml, config/study-spark.yaml). Run from the checkout:
#   snakemake -s workflow/study.smk --cores 2 --configfile config/study-h100.yaml
# Each campaign runs its own workflow (the Snakefile, as a nested Snakemake: its cells when
# the study says run_cells, and always its analysis up to stats/comparisons.csv); a
# campaign whose environment takes options derived from another's analysis (phase 2B ->
# docker_optimised of 2C and 2D) depends on the derived file, so it cannot run before the
# file exists and runs again when its content changes (the file is rewritten only then).
# The study then pools the declared family, corrects it as one, and builds one PDF.
import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir).parent / "src"))

from containertax.campaign import paths as R
from containertax.campaign import optimisation as ct_optimisation
from containertax.core import packaged as ct_packaged
from snakemake.exceptions import WorkflowError

REPO = Path(workflow.basedir).parent
CLI_CONFIGS = list(workflow.overwrite_configfiles or [])
if not CLI_CONFIGS:
    raise WorkflowError(
        "workflow/study.smk needs a study config: --configfile config/study-h100.yaml"
    )
STUDY_SOURCE = str(CLI_CONFIGS[-1])
try:
    from containertax.analysis import study as ct_study

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
    return bool(args.dryrun or args.lint or args.dag or args.rulegraph or args.summary)


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


# editing the study's analysis code rebuilds its tables (mtime rerun triggers)
STUDY_CODE = [
    str(ct_packaged.package() / layer / f"{m}.py")
    for layer, m in (
        ("analysis", "study"),
        ("analysis", "tables"),
        ("analysis", "correction"),
        ("workloads", "metric_registry"),
    )
]


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
    """The campaign's raw record folders (a new record changes a folder's mtime)."""
    raw = CAMPAIGNS[wildcards.campaign].campaign.root / "raw"
    return sorted(str(p) for p in raw.glob("*/*") if p.is_dir()) if raw.is_dir() else []


wildcard_constraints:
    campaign="|".join(CAMPAIGNS),
    derived="|".join(re.escape(f) for f in DERIVED) or "(?!)",


rule study:
    """The study's PDF and combined table."""
    default_target: True
    input:
        study_path(R.STUDY_PDF),
        study_path(R.STUDY_TABLE),
    localrule: True


rule campaign:
    """One campaign's own workflow (a nested Snakemake in this checkout): its cells when
    the study runs them, then its analysis; a summary with its data's hash."""
    input:
        config=lambda wildcards: str(CAMPAIGNS[wildcards.campaign].config),
        derived=derived_inputs,
        raw=raw_folders,
    output:
        study_path(R.STUDY_CAMPAIGN, campaign="{campaign}"),
    log:
        study_path("logs/{campaign}.log"),
    conda:
        "../envs/workflow.yaml"
    params:
        targets=lambda wildcards: (
            "all"
            if STUDY.run_cells
            else " ".join(
                shlex.quote(str(CAMPAIGNS[wildcards.campaign].campaign.root / f))
                for f in (
                    R.COMPARISONS,
                    R.FINDINGS,
                    "stats/descriptives.csv",
                    R.QUALITY,
                )
            )
        ),
        snakefile=str(REPO / "Snakefile"),
        study=STUDY_SOURCE,
        # a new summary format reruns the summaries (params rerun trigger)
        summary_version=ct_study.SUMMARY_VERSION,
        py=PY,
        env=ENV,
    shell:
        "{params.env} {params.py} -m snakemake {params.targets} --snakefile {params.snakefile:q} --cores 1 "
        "--nolock --configfile {input.config:q} > {log:q} 2>&1 && "
        "{params.py} -c 'import sys; from containertax.analysis import study as s; "
        "s.write_summary(s.load_file(sys.argv[1]), sys.argv[2], sys.argv[3])' "
        "{params.study:q} {wildcards.campaign} {output:q} >> {log:q} 2>&1"


rule derive_options:
    """The options a campaign's analysis derives (best-options --derive); made here only
    when the file is missing: otherwise refreshed by content before the DAG is built."""
    input:
        deriving_campaign,
    output:
        "{derived}",
    log:
        "{derived}.log",
    conda:
        "../envs/workflow.yaml"
    params:
        py=PY,
        env=ENV,
        config=lambda wildcards: DERIVED[wildcards.derived][0],
        environment=lambda wildcards: DERIVED[wildcards.derived][1],
    shell:
        "{params.env} {params.py} -m containertax best-options {params.config:q} "
        "--derive {params.environment} > {log:q} 2>&1"


rule study_tables:
    """Pool the declared family, correct it as one, write the paper's generated parts."""
    input:
        summaries=expand(
            study_path(R.STUDY_CAMPAIGN, campaign="{c}"), c=list(CAMPAIGNS)
        ),
        config=STUDY_SOURCE,
        code=STUDY_CODE,
    output:
        table=study_path(R.STUDY_TABLE),
        parts=expand(
            study_path(f"{R.STUDY_PAPER}/{{part}}.tex"),
            part=[
                "numbers",
                "design",
                "dependence",
                "combined",
                "data",
                "system",
                "quality",
                "selection",
                "figures",
                "findings",
                "threats",
                "beyond",
                "intro-author",
                "discussion-author",
            ],
        ),
    log:
        study_path("logs/study_tables.log"),
    run:
        ct_study.write(STUDY, OUT / "campaigns", OUT)


rule study_pdf:
    input:
        parts=rules.study_tables.output.parts,
        source=str(REPO / "paper" / "study.tex"),
        bib=str(REPO / "paper" / "references.bib"),
    output:
        study_path(R.STUDY_PDF),
    log:
        study_path("logs/study_pdf.log"),
    run:
        ct_study.build_pdf(Path(input.source), OUT / R.STUDY_PAPER, Path(output[0]))
