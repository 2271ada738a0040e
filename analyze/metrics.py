"""`autoprof analyze metrics` as a script: python analyze/metrics.py --help"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from autoprof.commands.analyze import run_script

if __name__ == "__main__":
    run_script("metrics")
