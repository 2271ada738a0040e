"""Issue #29, "the first ten minutes": what a newcomer met on a fresh clone, each now one clear
line (or a working answer) instead of a surprise."""

from __future__ import annotations

import pytest

from tests.test_cli import one_error_line


@pytest.mark.parametrize("text", ["", "\n\n", "# my events\n   # none yet\n"])
def test_an_events_file_that_names_no_event_is_an_error(cli_run, tmp_path, text):
    """Not "every event": that would be the longest profile the machine offers."""
    events = tmp_path / "events.txt"
    events.write_text(text)
    commands = (["profile", "--dry-run"], ["bench", "-n", "2"], ["submit", "--host", "nowhere"])
    for command in commands:
        line = one_error_line(cli_run(*command, "--events", events, "--", "true"))
        assert "names no event" in line and str(events) in line
