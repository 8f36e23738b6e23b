"""Every ``plmbench perf`` workload, registered: importing this module fills
``lit_models/measure/perf_registry.py``'s ``WORKLOADS`` (every Transformer architecture's steps) and
``BASELINE_WORKLOADS`` (ELMo's biLM, the GLUE baselines' BiLSTM). They are found, not listed
(``datamodules/discovery.py``): every module of this folder named ``*_perf`` registers its
workloads as it is imported, and so does every module an installed distribution names under the
``plmbench.perf_workloads`` entry-point group. A new model's workloads: a ``<name>_perf.py``
beside its family; ``bench/perf/`` reads the registry and names none of them."""

from datamodules.discovery import folder_modules, plugins
from lit_models.measure.perf_registry import BASELINE_WORKLOADS, WORKLOADS, Workload, special_ids

#: the entry-point group under which a distribution names its workloads' modules
WORKLOAD_GROUP = "plmbench.perf_workloads"

folder_modules("lit_models.families", suffix="_perf")
plugins(WORKLOAD_GROUP)

__all__ = ["BASELINE_WORKLOADS", "WORKLOADS", "WORKLOAD_GROUP", "Workload", "special_ids"]
