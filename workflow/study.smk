# A study: several campaigns as one workflow and one paper (config `study:`, e.g.
# config/study-h100.yaml, config/study-spark.yaml). Run from the checkout:
#   snakemake --cores 1                                      the default, the DGX Spark study
#   snakemake --cores 1 --configfile config/study-h100.yaml  another (the Snakefile runs a
#       config with a top-level study: key as a study; -s workflow/study.smk does the same)
# Each campaign runs its own workflow (the Snakefile, as a nested Snakemake: its cells when
# the study says run_cells, and always its analysis up to stats/comparisons.csv); a
# campaign whose environment takes options derived from another's analysis (phase 2B ->
# docker_optimised of 2C and 2D) depends on the derived file, so it cannot run before the
# file exists and runs again when its content changes (the file is rewritten only then).
# The study then pools the declared family, corrects it as one, and builds one PDF.


include: "rules/study_common.smk"
include: "rules/quantise.smk"


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
        quantised=quantised_inputs,
        # the module that writes the summary: a new summary format (SUMMARY_VERSION)
        # rewrites the summaries (the profiles rerun on file times only, not on params)
        summary_code=SUMMARY_CODE,
    output:
        study_path(R.STUDY_CAMPAIGN, campaign="{campaign}"),
    log:
        study_path("logs/{campaign}.log"),
    conda:
        "../envs/workflow.yaml"
    resources:
        **MACHINE,
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
                    # a factorial campaign's effects: what its derived options read
                    *(
                        (R.EFFECTS,)
                        if CAMPAIGNS[wildcards.campaign].campaign.raw.get("factorial")
                        else ()
                    ),
                )
            )
        ),
        snakefile=str(REPO / "Snakefile"),
        study=STUDY_SOURCE,
        py=PY,
        env=ENV,
    shell:
        "{params.env} {params.py} -m snakemake {params.targets} --snakefile {params.snakefile:q} --cores 1 "
        "--nolock --configfile {input.config:q} > {log:q} 2>&1 || "
        "{{ echo 'containertax: the workflow of campaign {wildcards.campaign} failed "
        "(not run yet? then run it first, or set run_cells: true in the study config); the end "
        "of its log {log}:' >&2; grep -v '^\s*$' {log:q} | tail -n 12 >&2; exit 1; }} && "
        "{params.py} -c 'import sys; from containertax.publishing import study as s; "
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
        authored=AUTHORED,
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
                "conclusion-author",
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
