"""GPT-2: left-padded prompts with counted positions give the logits of right padding; GPT-2 small
has the paper's size (parity with transformers on right- and left-padded batches:
``tests/nets/test_parity.py``; exports, the classification head, cached decoding and the other
contracts: ``tests/contracts``)."""

import pytest
import torch

from datamodules.tokenization import TextTokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.nets.gpt import GPTConfig, GPTLMHeadModel
from tests.nets.parity import TEXT, TOLERANCE, batch, randomize_

GPT2 = get_arch("gpt2")


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(GPT2.tokenizer, TEXT, vocab_size=300, lowercase=False)


def left_padded(inputs: dict, pad: int) -> dict:
    """The same rows with their pads moved in front (as prompts for generation are)."""
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    shift = (mask == 0).sum(1)
    index = (torch.arange(ids.shape[1])[None] - shift[:, None]) % ids.shape[1]
    moved = {"input_ids": ids.gather(1, index), "attention_mask": mask.gather(1, index)}
    assert (moved["attention_mask"][:, 0] == 0).any() and (moved["input_ids"][:, -1] != pad).all()
    return moved


def test_left_padding_with_counted_positions_equals_right_padding(tokenizer):
    """Generation's position ids for a left-padded prompt, counted over its non-pad tokens, give
    every real token the logits it has right-padded (parity with transformers on both sides:
    ``tests/nets/test_parity.py``)."""
    config = GPTConfig(vocab_size=tokenizer.vocab_size, n_embd=36, n_layer=3, n_head=3,
                       n_inner=50, n_positions=67)
    net = randomize_(GPTLMHeadModel(config)).eval()
    inputs = batch(tokenizer, TEXT[3:7])
    left = left_padded(inputs, tokenizer.special.pad)
    positions = (left["attention_mask"].cumsum(1) - 1).clamp(min=0)
    with torch.no_grad():
        right = net.logits(net(**inputs).last_hidden_state)[inputs["attention_mask"].bool()]
        moved = net.logits(net(**left, position_ids=positions).last_hidden_state)
    assert (right - moved[left["attention_mask"].bool()]).abs().max() <= TOLERANCE


def test_gpt2_small_has_the_papers_size():
    """GPT-2 small: 124M parameters with the 50,257-token vocabulary (117M as the paper counted)."""
    from omegaconf import OmegaConf

    from bench.run.execute import CONF_DIR
    from lit_models.core.build import net_config

    preset = OmegaConf.load(CONF_DIR / "model" / "gpt2-small-scratch.yaml")
    with torch.device("meta"):
        net = GPTLMHeadModel(net_config(GPT2, preset, preset.vocab_size, 1))
    assert sum(p.numel() for p in net.parameters()) == 124_439_808
