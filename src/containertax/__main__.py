import sys

from containertax.cli import main

sys.exit(main())
