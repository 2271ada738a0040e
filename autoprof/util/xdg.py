"""autoprof's folders in the user's home, as the XDG Base Directory spec places them.

Per the spec an empty or relative `$XDG_CACHE_HOME` / `$XDG_DATA_HOME` counts as unset, so
every caller agrees on one answer (they used to disagree on an empty variable).
"""

from __future__ import annotations

import os
from pathlib import Path


def _base(variable: str, default: Path) -> Path:
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else default


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/autoprof` (default `~/.cache/autoprof`): data that can be rebuilt."""
    return _base("XDG_CACHE_HOME", Path.home() / ".cache") / "autoprof"


def data_dir() -> Path:
    """`$XDG_DATA_HOME/autoprof` (default `~/.local/share/autoprof`): the user's own data."""
    return _base("XDG_DATA_HOME", Path.home() / ".local" / "share") / "autoprof"
