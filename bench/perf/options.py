"""``plmbench perf``'s options, parsed before anything heavy loads: ``plmbench perf --help``
answers without importing torch; the measurement modules (``bench/perf/measure.py``,
``bench/perf/length.py``, ``bench/perf/generation.py``) load once the options are known.

The steps and attention implementations are named with the workloads' registry
(``lit_models/measure/perf_registry.py``, which loads no torch); the families register one workload
per step, each with its implementations.
"""

import argparse
from pathlib import Path

from bench.arguments import OneLineParser
from lit_models.measure.perf_registry import ATTENTION, STEPS


def parser() -> OneLineParser:
    p = OneLineParser(prog="plmbench perf", description="Time our nets' pretraining, fine-tuning "
                      "and inference steps against their transformers counterparts (sdpa, eager), "
                      "interleaved, as tokens/s, FLOP/s, MFU and memory (bench/perf/measure.py).")
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated: {', '.join(STEPS)}")
    p.add_argument("--attention", default=",".join(ATTENTION),
                   help="transformers' attention implementations to compare with")
    p.add_argument("--batch-size", type=int, default=None, help="32 (--lengths: 1)")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default=None, help="default: cuda when there is one, else cpu")
    p.add_argument("--precision", choices=("32-true", "bf16-mixed"), default=None,
                   help="bf16-mixed on CUDA (the gpu trainer preset), else 32-true")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--json", type=Path, help="also write the report as JSON")
    p.add_argument("--lengths", help="e.g. 512,1024,2048,4096: encoder forward+backward "
                   "memory and time against full attention (bench/perf/length.py)")
    p.add_argument("--against", default="roberta",
                   help="--lengths: the full-attention architecture of the same sizes")
    p.add_argument("--generate", action="store_true", help="generation tokens/s with and "
                   "without the cache vs transformers' generate (bench/perf/generation.py)")
    p.add_argument("--new-tokens", type=int, default=64, help="--generate: tokens per row")
    p.add_argument("--beams", type=int, default=1, help="--generate: 1 = greedy")
    return p


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(the options, the Hydra overrides that pick the model) of ``plmbench perf ARGV``."""
    return parser().parse_known_args(argv)
