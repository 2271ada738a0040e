"""`python -m autoprof` and the `autoprof` command: a command's --help from the help cache
(`commands.helpcache`: no click to import), anything else through click (`autoprof.cli`)."""

from __future__ import annotations

import os
import sys

from autoprof.commands import helpcache


def main(prog: str | None = None) -> None:
    """The program; `prog` is the name click would give it (the script's own name when None)."""
    if not helpcache.printed(sys.argv[1:], prog or os.path.basename(sys.argv[0])):
        from autoprof.cli import main as cli_main

        cli_main()


if __name__ == "__main__":
    main("python -m autoprof")
