# Native vs container GPU inference: models x environments x repetitions, each cell behind
# a thermal gate, in a counterbalanced order, with raw records that are never overwritten.
from snakemake.utils import min_version

min_version("9.17")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/preflight.smk"
include: "workflow/rules/cells.smk"
include: "workflow/rules/aggregate.smk"


rule all:
    default_target: True
    input:
        at(R.SCHEDULE),
        at(R.SYSTEM),
        at(R.RUNS),
