"""Every ``plmbench perf`` workload, registered: importing this module fills
``lit_models/core/perf_registry.py``'s ``WORKLOADS`` (every Transformer architecture's steps) and
``BASELINE_WORKLOADS`` (ELMo's biLM, the GLUE baselines' BiLSTM), as
``lit_models/archs/__init__.py`` registers the architectures. A new model's workloads: a module
beside its family that registers them, plus its name below; ``bench/perf/`` reads the registry and
names none of them."""

from lit_models.core.perf_registry import BASELINE_WORKLOADS, WORKLOADS, Workload, special_ids
from lit_models.families import bilm_perf, bilstm_perf, transformer_perf  # noqa: F401 (they register)

__all__ = ["BASELINE_WORKLOADS", "WORKLOADS", "Workload", "special_ids"]
