"""The one exception type plmbench raises for bad input.

It lives at the bottom of the import layers (DESIGN.md, "Layers and registries") so every layer
can raise it; only ``bench/`` catches it and turns it into the one-line message
``error: <message>`` with exit status 2, leaving nothing partial behind. Nets raise plain
``ValueError``s, as torch does; the code that builds a net from a preset turns those into this.

A failed run's record keeps the failure's kind (``bench/run/execute.py``): ``input`` (a file, a
dataset, an option: a re-run tries again, so fixing the input is all it takes) or ``configuration``
(the configuration itself fails, as a diverging loss does: a re-run skips it until
``--rerun-failed``).
"""

#: the kinds of failure a PlmbenchError may be (see the module docstring)
KINDS = ("input", "configuration")


class PlmbenchError(Exception):
    """Bad input or a missing resource, with a one-line message naming the fix."""

    def __init__(self, message: str, kind: str = "input") -> None:
        super().__init__(message)
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r} is not one of {KINDS}")
        self.kind = kind
