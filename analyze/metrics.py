"""`autoprof analyze metrics` as a script: python analyze/metrics.py --help"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from autoprof.cli import main_analyze

if __name__ == "__main__":
    main_analyze("metrics", sys.argv[1:])
