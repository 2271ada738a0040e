"""Python child processes started so that nothing of the folder or the environment they start
from runs in them: autoprof runs as root on shared machines, often from a folder other users can
write.

`python -m MODULE` puts the working folder first on sys.path: a `shlex.py` planted there runs
as root in every child (issue #38, point 1). So every Python child runs in isolated mode (`-I`:
no working folder or script folder on sys.path, no PYTHON* variables, no user site-packages),
from a folder of its own choosing (`SAFE_CWD` unless it needs another), with an environment it
is given explicitly (`plain_env`: none of autoprof's AUTOPROF_* settings, which hold the store's
and the queue's passwords).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

SAFE_CWD = "/"
# what a child that reads or writes files needs of its parent's environment: where programs
# are, the locale, the time zone, the temporary and cache folders
_PLAIN = ("PATH", "HOME", "LANG", "TZ", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")


def python_argv(module: str, *args: str) -> list[str]:
    """`python -I -m MODULE ARGS` with this interpreter."""
    return [sys.executable, "-I", "-m", module, *args]


def plain_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The few variables of `base` (this process's) a child needs: PATH, HOME, the locale
    (LANG, LC_*), TZ, TMPDIR and the XDG cache and config folders."""
    env = os.environ if base is None else base
    return {k: v for k, v in env.items() if k in _PLAIN or k.startswith("LC_")}
