"""GPT-2 against transformers: random transformers checkpoints imported with ``from_hf`` give the
same ``last_hidden_state`` (GPT2Model) and LM logits (GPT2LMHeadModel) to 1e-5 in float32 on
right- and left-padded batches (exports, the classification head, cached decoding and the other
contracts: ``tests/contracts``)."""

from pathlib import Path

import pytest
import torch

from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.gpt import GPTLMHeadModel, GPTModel
from tests.conftest import require
from tests.nets.parity import (
    TEXT,
    TOLERANCE,
    assert_close,
    batch,
    randomize_,
)

transformers = require("transformers")

GPT2 = get_arch("gpt2")
#: sizes no other test uses: odd heads, a feed-forward size apart from 4H, exact GELU
CONFIGS = [
    dict(n_embd=36, n_layer=3, n_head=3, n_inner=50, n_positions=67),
    dict(n_embd=32, n_layer=1, n_head=4, n_positions=90, activation_function="gelu",
         layer_norm_epsilon=1e-6),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(GPT2.tokenizer, TEXT, vocab_size=300, lowercase=False)


def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory: Path,
               **extra) -> torch.nn.Module:
    """A random transformers GPT-2 saved with save_pretrained, beside our tokenizer files."""
    special = tokenizer.special
    config = transformers.GPT2Config(
        vocab_size=tokenizer.vocab_size, pad_token_id=special.pad, bos_token_id=special.cls,
        eos_token_id=special.sep, **sizes, **extra)
    model = randomize_(getattr(transformers, cls_name)(config))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, sizes["n_positions"])
    return model


def left_padded(inputs: dict, pad: int) -> dict:
    """The same rows with their pads moved in front (as prompts for generation are)."""
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    shift = (mask == 0).sum(1)
    index = (torch.arange(ids.shape[1])[None] - shift[:, None]) % ids.shape[1]
    moved = {"input_ids": ids.gather(1, index), "attention_mask": mask.gather(1, index)}
    assert (moved["attention_mask"][:, 0] == 0).any() and (moved["input_ids"][:, -1] != pad).all()
    return moved


@pytest.mark.parametrize("sizes", CONFIGS)
@pytest.mark.parametrize("padding", ["right", "left"])
def test_from_hf_matches_gpt2_model(sizes, padding, tokenizer, tmp_path):
    reference = checkpoint("GPT2Model", sizes, tokenizer, tmp_path)
    _, net, loaded = from_hf(tmp_path)
    assert isinstance(net, GPTModel) and loaded.special == tokenizer.special
    inputs = batch(tokenizer, TEXT[:4])
    if padding == "left":
        inputs = left_padded(inputs, tokenizer.special.pad)
    with torch.no_grad():
        ours = net.eval()(**inputs).last_hidden_state
        theirs = reference(**inputs).last_hidden_state
    assert torch.isfinite(ours).all()  # pad queries too: nothing NaN leaks into later layers
    assert_close(ours, theirs, inputs["attention_mask"])


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_gpt2_lm_head_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("GPT2LMHeadModel", sizes, tokenizer, tmp_path)
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, GPTLMHeadModel)
    inputs = batch(tokenizer, TEXT[3:7])
    left = left_padded(inputs, tokenizer.special.pad)
    # generation's position ids for a left-padded prompt: counted over its non-pad tokens
    positions = (left["attention_mask"].cumsum(1) - 1).clamp(min=0)
    types = torch.randint(0, 5, inputs["input_ids"].shape)  # GPT-2 embeds them as tokens
    with torch.no_grad():
        for given in (inputs, {**left, "position_ids": positions}, {**inputs,
                                                                    "token_type_ids": types}):
            ours = net.logits(net.eval()(**given).last_hidden_state)
            assert_close(ours, reference(**given).logits, given["attention_mask"])
    # left padding with counted positions equals right padding, token for token
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
