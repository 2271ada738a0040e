"""README.md's examples work as written, one after another."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).parents[1]


def test_the_readmes_profiles_each_have_a_folder_of_their_own():
    """Issue #41: two README examples profiled different commands into `-o out`; the second,
    run after the first, was refused ("out holds a profile of another command")."""
    import re
    import shlex

    profiles: dict[str, list[str]] = {}
    text = (REPO / "README.md").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        found = re.search(r"autoprof (?:profile|record|memory) (.*)", line)
        if found and " -- " in found[1]:
            words = shlex.split(found[1].split("#")[0].replace("$(", "").replace(")", ""))
            folder = words[words.index("-o") + 1] if "-o" in words else "out"
            profiles.setdefault(folder, []).append(" ".join(words[words.index("--") + 1 :]))
    assert len(profiles) >= 4
    assert {f: c for f, c in profiles.items() if len(set(c)) > 1} == {}
