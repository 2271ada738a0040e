"""The one exception type the CLI turns into a one-line message and a non-zero exit."""


class AutoprofError(Exception):
    """A problem the user can act on: bad input, a missing tool, an unusable machine setting.

    Library code raises it with a complete, one-line message; the CLI prints it as
    ``autoprof: error: <message>`` and exits with status 2. Anything else is a bug.
    """
