"""``plmbench perf``: our nets against their ``transformers`` counterparts (``measure``), against
sequence length (``length``), in generation (``generation``), and the retrieval index
(``index``). Its options (``options``) parse before torch loads. Imports the shared modules of
``bench/``'s root; never ``run``, ``boards`` or ``studies``."""
