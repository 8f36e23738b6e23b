"""The one exception type plmbench raises for bad input.

Its message is a single line that names what is wrong and how to fix it; the CLI prints it
as ``error: <message>`` and exits with status 2, leaving nothing partial behind.
"""


class PlmbenchError(Exception):
    """Bad input or a missing resource, with a one-line message naming the fix."""
