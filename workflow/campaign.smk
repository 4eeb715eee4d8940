# One campaign (snakemake --cores 1 --configfile config/FILE.yaml): models x environments x
# repetitions, each cell behind a thermal gate, in a counterbalanced order, with raw records
# that are never overwritten; then quality checks, statistics, correction, figures, tables
# and the paper PDF. Included by the Snakefile for any config without a study: key.


report: "report/workflow.rst"


include: "rules/common.smk"


if CAMPAIGN.is_import:

    include: "rules/import.smk"

else:

    include: "rules/quantise.smk"
    include: "rules/preflight.smk"
    include: "rules/cells.smk"
    include: "rules/aggregate.smk"


STOPPING = bool(CAMPAIGN.raw.get("stopping")) and not CAMPAIGN.is_import
if STOPPING:

    include: "rules/sequential.smk"


include: "rules/analysis.smk"


rule resolved_config:
    """The validated config every step reads: written before the DAG is built when jobs
    run (workflow/rules/common.smk); this job stands for it in a plan of a fresh folder.
    """
    output:
        RESOLVED,
    log:
        at(R.STEP_LOG, step="resolved_config"),
    run:
        ct_config.write_resolved(CAMPAIGN, Path(output[0]))


rule all:
    default_target: True
    input:
        [] if CAMPAIGN.is_import else [at(R.SCHEDULE), at(R.SYSTEM)],
        sequential_targets if STOPPING else unfinished_cell_files(),
        ANALYSIS_OUTPUTS,  # the paper and its parts: a missing one is rebuilt (analysis.smk)


rule cells:
    """Only the benchmark cells (on a machine without the analysis stack or TeX)."""
    input:
        [] if CAMPAIGN.is_import else [at(R.SCHEDULE), at(R.SYSTEM)],
        sequential_targets if STOPPING else unfinished_cell_files(),
