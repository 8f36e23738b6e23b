"""Measurement: a step's FLOPs and throughput (``throughput.py``), the peak FLOP/s of known chips
(``peak_flops.py``), a model's memory footprint (``footprint.py``) and what ``plmbench perf``
measures, registered by the code it measures (``perf_registry.py``). Below the shared training
machinery (``lit_models/core``), above the architectures."""
