"""Close matches for a name that is not known ("did you mean ...?"), for error messages only:
difflib loads when a message needs it, not at every start (~2 ms of each `profile`)."""

from __future__ import annotations

from collections.abc import Iterable


def close_matches(word: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """At most `n` of `choices` close to `word`, the closest first (difflib's ratio >= cutoff)."""
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)
