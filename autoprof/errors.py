"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class AutoprofError(Exception):
    """A problem the user can act on: bad input, a missing tool, an unusable machine setting.

    Library code raises it with a complete, one-line message; the CLI prints it as
    ``autoprof: error: <message>`` and exits with status 2. Anything else is a bug.
    """


class NewerFormat(AutoprofError):
    """A file written by a newer autoprof: its fields may mean what this one cannot know, so it
    is refused rather than misread."""

    def __init__(self, path: object, found: int, known: int):
        super().__init__(
            f"{path}: written by a newer autoprof (format {found}, this one reads up to "
            f"{known}); upgrade autoprof"
        )
