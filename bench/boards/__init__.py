"""Boards: pure functions of run records (DESIGN.md contract 8). Every caller makes its tables
through ``tables`` (the one entry point: tasks, selection, baseline rows from ``baselines``,
sections). The table (``table``) of cells and rows (``cells``), its config (``config``), scoring
(``score``), text, HTML and plots, eval sections, selection, references, statistics, the paired
bootstrap and significance, and what is made of boards (submission files, the boards in the
docs). Imports the shared modules of ``bench/``'s root; never ``run``, ``perf`` or ``studies``."""
