"""One run, start to record: its config checked (``config_check``), its directory named
(``run_dir``), its checkpoints resumed (``checkpoints``, ``hub_start``), its task family built
(``task_family``), its baselines kept (``baselines``) and the run itself (``execute``:
``plmbench run``). Imports the shared modules of ``bench/``'s root; never ``boards``, ``perf`` or
``studies``. Nothing is imported here, so ``import bench.run.models`` loads no torch."""
