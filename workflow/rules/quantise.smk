# Checkpoints no one publishes (checkpoints.SOURCES: Quantised), made once on the host before
# any run that reads them: the BF16 base model downloaded beside it, then Model Optimizer's
# hf_ptq.py in the campaign's image exporting to the model's model_path, which every
# environment reads (planned in campaign/quantise.py, made by execution/quantise.py).
# Included by the campaign and the study workflows, which set QUANTISE (checkpoint folder
# -> job), QUANTISE_CT (the containertax command) and MACHINE (the resources of a measured
# run: a download or quantisation never runs beside one).


wildcard_constraints:
    qckpt="|".join(re.escape(d) for d in QUANTISE) or "(?!)",
    qbase="|".join(re.escape(j.base) for j in QUANTISE.values()) or "(?!)",


rule fetch_base:
    """The base model a quantised checkpoint is made from (hf download of what the loader
    reads; a gated one needs its licence accepted and `.venv/bin/hf auth login`)."""
    output:
        directory("{qbase}"),
    log:
        "{qbase}.fetch.log",
    conda:
        # the download runs .venv/bin/hf, which scripts/setup-spark.sh installs
        "../../envs/workflow.yaml"
    resources:
        **MACHINE,
    params:
        command=lambda wc: ct_quantise.fetch_command(wc.qbase, QUANTISE),
    shell:
        "{params.command} > {log:q} 2>&1"


rule quantise:
    """The quantised checkpoint and its marker (command, time, size, what made it)."""
    input:
        base=lambda wc: QUANTISE[wc.qckpt].base,
    output:
        checkpoint=directory("{qckpt}"),
        marker="{qckpt}.quantised.json",  # campaign/quantise.marker(), as doctor reads it
    log:
        "{qckpt}.quantise.log",
    conda:
        "../../envs/workflow.yaml"
    resources:
        **MACHINE,
    params:
        ct=QUANTISE_CT,
        model=lambda wc: QUANTISE[wc.qckpt].model,
        image=lambda wc: QUANTISE[wc.qckpt].image,
        qformat=lambda wc: QUANTISE[wc.qckpt].qformat,
    shell:
        "{params.ct} quantise --model {params.model:q} --qformat {params.qformat:q} "
        "--out {output.checkpoint:q} --image {params.image:q} --log {log:q}"
