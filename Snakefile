# Native vs container GPU inference, as a study or as one campaign.
#   snakemake --cores 1                                    the DGX Spark study: phases 2A and
#       2B, the Docker options 2B's analysis derives, then 2C and 2D, and the study paper
#       (config/study-spark.yaml; workflow/study.smk)
#   snakemake --cores 1 --configfile config/FILE.yaml      one campaign (workflow/campaign.smk),
#       or the study a config with a top-level study: key declares
from snakemake.utils import min_version

min_version("9.17")


configfile: "config/study-spark.yaml"


include: "workflow/rules/mode.smk"


if STUDY_MODE:

    include: "workflow/study.smk"

else:

    include: "workflow/campaign.smk"


rule default:
    """What `snakemake --cores 1` makes: the study's paper (rule study), or the campaign's
    cells and paper (rule all)."""
    default_target: True
    input:
        rules.study.input if STUDY_MODE else rules.all.input,
    localrule: True
