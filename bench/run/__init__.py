"""One run, start to record: its config checked (``config_check``), its directory named
(``run_dir``), its checkpoints resumed (``checkpoints``, ``hub_start``) and the run itself
(``execute``, which builds its task family and keeps its baselines through bench/'s root:
``plmbench run``). Imports the shared modules of ``bench/``'s root; never ``boards``, ``perf`` or
``studies``. Nothing is imported here, so ``import bench.run.models`` loads no torch."""
