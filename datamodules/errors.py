"""The one exception type plmbench raises for bad input.

It lives at the bottom of the import layers (DESIGN.md, "Layers and registries") so every layer
can raise it; only ``bench/`` catches it and turns it into the one-line message
``error: <message>`` with exit status 2, leaving nothing partial behind. Nets raise plain
``ValueError``s, as torch does; the code that builds a net from a preset turns those into this.
"""


class PlmbenchError(Exception):
    """Bad input or a missing resource, with a one-line message naming the fix."""
