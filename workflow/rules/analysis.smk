# From raw records (or an imported table) to the paper: quality -> stats per model ->
# correction across the family -> figures, tables, numbers -> PDF. Nothing here depends on
# a benchmark cell through the DAG, so `snakemake paper` never runs one.


rule quality:
    """Data-quality report and the exclusion rule, before any statistic."""
    input:
        config=RESOLVED,
        runs=at(R.RUNS),
        code=ANALYSIS_CODE,
    output:
        annotated=at(R.ANNOTATED),
        kept=at(R.KEPT),
        report=at(R.QUALITY),
        order=at(R.ORDER),
    log:
        at(R.STEP_LOG, step="quality"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
        out_dir=lambda wildcards, output: str(Path(output.report).parent),
    shell:
        "{params.ct} quality --config {input.config:q} --runs {input.runs:q} "
        "--out-dir {params.out_dir:q} --out-order {output.order:q} --log {log:q}"


rule stats:
    """Per model: descriptives, tests, effect sizes, intervals (one process for all models:
    importing the statistics stack costs more than the computation)."""
    input:
        config=RESOLVED,
        kept=at(R.KEPT),
        requests=at(R.REQUESTS_ALL),
        code=ANALYSIS_CODE,
    output:
        comparisons=expand(at(R.MODEL_COMPARISONS), model=ANALYSIS_MODELS),
        descriptives=expand(at(R.MODEL_DESCRIPTIVES), model=ANALYSIS_MODELS),
    log:
        at(R.STEP_LOG, step="stats"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
        models=ANALYSIS_MODELS,
    shell:
        "{params.ct} stats --config {input.config:q} --kept {input.kept:q} "
        "--requests {input.requests:q} --models {params.models:q} "
        "--outs {output.comparisons:q} --out-descs {output.descriptives:q} --log {log:q}"


rule correct:
    """Bonferroni and Benjamini-Hochberg across all models, metrics and comparisons."""
    input:
        config=RESOLVED,
        models=expand(at(R.MODEL_COMPARISONS), model=ANALYSIS_MODELS),
        descs=expand(at(R.MODEL_DESCRIPTIVES), model=ANALYSIS_MODELS),
        code=ANALYSIS_CODE,
    output:
        comparisons=report(
            at(R.COMPARISONS),
            caption="../report/table.rst",
            category="Comparisons",
        ),
        descriptives=at(R.DESCRIPTIVES),
    log:
        at(R.STEP_LOG, step="correct"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} correct --config {input.config:q} --models {input.models:q} "
        "--descs {input.descs:q} --out {output.comparisons:q} "
        "--out-desc {output.descriptives:q} --log {log:q}"


rule findings:
    """Every finding once: each comparison's verdict (at the look where a model stopped,
    under a stopping rule), the comparisons without the blocks that compiled, the quality
    findings, and where the paper must say each (the findings rule)."""
    input:
        config=RESOLVED,
        kept=at(R.KEPT),
        comparisons=at(R.COMPARISONS),
        quality=at(R.QUALITY),
        records=record_folders_or_none,
        code=ANALYSIS_CODE,
    output:
        findings=at(R.FINDINGS),
        facts=at(R.FACTS),
    log:
        at(R.STEP_LOG, step="findings"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} findings --config {input.config:q} --kept {input.kept:q} "
        "--comparisons {input.comparisons:q} --quality {input.quality:q} "
        "--out {output.findings:q} --out-facts {output.facts:q} --log {log:q}"


rule figures:
    input:
        config=RESOLVED,
        kept=at(R.KEPT),
        findings=at(R.FINDINGS),
        requests=at(R.REQUESTS_ALL),
        code=ANALYSIS_CODE,
    output:
        figures=report(
            directory(at(R.FIGURES_DIR)),
            patterns=["{number,[0-9]+}-{name}.pdf"],
            caption="../report/figures.rst",
            category="Figures",
        ),
        tex=at(R.FIGURES_TEX),
    log:
        at(R.STEP_LOG, step="figures"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} figures --config {input.config:q} --kept {input.kept:q} "
        "--findings {input.findings:q} --requests {input.requests:q} "
        "--out-dir {output.figures:q} --out-tex {output.tex:q} --log {log:q}"


rule tables:
    input:
        config=RESOLVED,
        kept=at(R.KEPT),
        findings=at(R.FINDINGS),
        descriptives=at(R.DESCRIPTIVES),
        order=at(R.ORDER),
        quality=at(R.QUALITY),
        records=record_folders_or_none,
        code=ANALYSIS_CODE,
    output:
        **{name: at(R.TABLE, table=name) for name in R.TABLES},
    log:
        at(R.STEP_LOG, step="tables"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
        out_dir=lambda wildcards, output: str(Path(output.descriptives).parent),
    shell:
        "{params.ct} tables --config {input.config:q} --kept {input.kept:q} "
        "--findings {input.findings:q} --desc {input.descriptives:q} "
        "--order {input.order:q} --quality {input.quality:q} --out-dir {params.out_dir:q} "
        "--log {log:q}"


rule numbers:
    """Every number and condition the text quotes, as LaTeX macros; and the quality
    section."""
    input:
        config=RESOLVED,
        kept=at(R.KEPT),
        records=record_folders_or_none,
        findings=at(R.FINDINGS),
        facts=at(R.FACTS),
        quality=at(R.QUALITY),
        order=at(R.ORDER),
        # an import's copies dropped and runs renumbered (the data section prints them)
        imported=at(R.IMPORT_REPORT) if CAMPAIGN.is_import else [],
        code=ANALYSIS_CODE,
    output:
        numbers=at(R.NUMBERS_TEX),
        quality=at(R.QUALITY_TEX),
    log:
        at(R.STEP_LOG, step="numbers"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
    shell:
        "{params.ct} numbers --config {input.config:q} --kept {input.kept:q} "
        "--findings {input.findings:q} --quality {input.quality:q} "
        "--order {input.order:q} --out {output.numbers:q} --out-quality {output.quality:q} --log {log:q}"


if FACTORIAL:

    rule effects:
        """A factorial campaign's main effects and estimable interactions (log scale,
        block effects), half-normal plots and its paper section."""
        input:
            config=RESOLVED,
            kept=at(R.KEPT),
            code=ANALYSIS_CODE,
        output:
            effects=at(R.EFFECTS),
            tex=at(R.FACTORIAL_TEX),
            abstract=at(R.FACTORIAL_ABSTRACT),
        log:
            at(R.STEP_LOG, step="effects"),
        conda:
            "../../envs/workflow.yaml"
        params:
            ct=CT,
        shell:
            "{params.ct} effects --config {input.config:q} --kept {input.kept:q} "
            "--out {output.effects:q} --out-tex {output.tex:q} --log {log:q}"


FACTORIAL_OUTPUTS = rules.effects.output if FACTORIAL else []


rule pdf:
    """The PDF, compiled with latexmk (and bibtex) from paper/ and the generated parts, then
    reviewed: review.json lists what a reviewer would reject."""
    input:
        config=RESOLVED,
        source=PAPER_SOURCES,
        figures=at(R.FIGURES_TEX),
        tables=rules.tables.output,
        numbers=at(R.NUMBERS_TEX),
        quality=at(R.QUALITY_TEX),
        facts=at(R.FACTS),
        factorial=FACTORIAL_OUTPUTS,
        code=ANALYSIS_CODE,
    output:
        report(at(R.PDF), caption="../report/paper.rst", category="Paper"),
    log:
        at(R.STEP_LOG, step="paper"),
    conda:
        "../../envs/workflow.yaml"
    params:
        ct=CT,
        source=lambda wildcards, input: str(Path(input.source[0]).parent),
        build=lambda wildcards, output: str(Path(output[0]).parent),
    shell:
        "{params.ct} paper --config {input.config:q} --source {params.source:q} "
        "--build {params.build:q} --out {output:q} --log {log:q}"


# Every file the analysis makes, the PDF last: the inputs of the `paper` and `all` targets.
ANALYSIS_OUTPUTS = [
    *(rules.import_runs.output if CAMPAIGN.is_import else rules.aggregate.output),
    *rules.quality.output,
    *rules.stats.output,
    *rules.correct.output,
    *rules.findings.output,
    *rules.figures.output,
    *rules.tables.output,
    *rules.numbers.output,
    *FACTORIAL_OUTPUTS,
    *rules.pdf.output,
]


rule paper:
    """The paper and every analysis file it is made from. Snakemake rebuilds a missing
    file between a target and its sources only for a target: runs.csv removed by its
    clock-skew guard (while its record of runs.csv stays in .snakemake/metadata) was left
    missing behind "Nothing to be done" as long as the files after it were there. As this
    rule's inputs, a missing one is rebuilt, with everything after it."""
    input:
        ANALYSIS_OUTPUTS,
    localrule: True
