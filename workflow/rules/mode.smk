# What this invocation runs: a study (no --configfile: the default study; or a config with a
# top-level study: key) or one campaign (any other --configfile).
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from containertax.campaign.configfile import study_campaigns

CLI_CONFIGS = list(workflow.overwrite_configfiles or [])
STUDY_MODE = not CLI_CONFIGS or study_campaigns(Path(CLI_CONFIGS[-1])) is not None
if not STUDY_MODE:
    # A job that re-parses the workflow in a subprocess does so without the profile's
    # replace-workflow-config: the default study's key is then merged into the campaign's.
    config.pop("study", None)
