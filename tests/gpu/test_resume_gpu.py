"""Resuming on a GPU: the CUDA generators' states go into a run's checkpoints and come back when
the resumed run starts training (bench/run/checkpoints.py, RngState), so dropout after a resume
draws what the uninterrupted run drew (on CPU: tests/bench/run/test_resume.py)."""

import torch

from bench.run.checkpoints import RngState


def test_cuda_generator_states_come_back():
    callback = RngState()
    torch.cuda.manual_seed_all(0)
    torch.rand(3, device="cuda")
    state = callback.state_dict()  # what last.ckpt holds
    assert state["cuda"], "no CUDA generator state saved"
    expected = torch.rand(5, device="cuda")  # what the run draws after its checkpoint
    torch.rand(7, device="cuda")  # the killed run went on drawing
    callback.load_state_dict(state)
    callback.on_train_start(None, None)
    assert torch.equal(torch.rand(5, device="cuda"), expected)
