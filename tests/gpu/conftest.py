"""The GPU checks (marker ``gpu``): every test in this folder needs a CUDA device and is skipped
without one. Run them on a GPU machine with ``pytest -m gpu tests/gpu``."""

import pytest
import torch

HERE = __file__.rsplit("/", 1)[0]


def pytest_collection_modifyitems(config, items) -> None:
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if str(item.path).startswith(HERE):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(skip)
