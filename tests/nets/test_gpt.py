"""GPT-2 against transformers: random transformers checkpoints imported with ``from_hf`` give the
same ``last_hidden_state`` (GPT2Model) and LM logits (GPT2LMHeadModel) to 1e-5 in float32 on
right- and left-padded batches; our nets exported with ``to_hf`` load back into transformers
equal; a fine-tuned GPT2ForSequenceClassification keeps its head (last non-pad token); cached
incremental decoding gives the logits of one causal pass."""

from pathlib import Path

import pytest
import torch

from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.core.hf import from_hf, to_hf
from lit_models.nets.gpt import GPTConfig, GPTLMHeadModel, GPTModel
from tests.conftest import require
from tests.nets.parity import (
    TEXT,
    TOLERANCE,
    assert_classifier_round_trips,
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
    net, loaded = from_hf(tmp_path)
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
    net, _ = from_hf(tmp_path, with_heads=True)
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


def test_to_hf_round_trips_through_transformers(tokenizer, tmp_path):
    special = tokenizer.special
    config = GPTConfig(vocab_size=tokenizer.vocab_size, pad_token_id=special.pad, **CONFIGS[0])
    ours = randomize_(GPTLMHeadModel(config))
    to_hf(ours, tokenizer, tmp_path / "export")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "export").eval()
    assert type(theirs).__name__ == "GPT2LMHeadModel"
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "export")
    pair = hf_tokenizer("The cat sat.", "It was a dog!")["input_ids"]
    assert pair == tokenizer.backend.encode("The cat sat.", "It was a dog!").ids
    inputs = batch(tokenizer, TEXT[:3])
    with torch.no_grad():
        logits = ours.logits(ours(**inputs).last_hidden_state)
        assert_close(logits, theirs(**inputs).logits, inputs["attention_mask"])
    again, _ = from_hf(tmp_path / "export", with_heads=True)
    for (name, mine), theirs_param in zip(ours.named_parameters(), again.parameters(),
                                          strict=True):
        assert torch.equal(mine, theirs_param), name


def test_fine_tuned_classification_head_round_trips(tokenizer, tmp_path):
    """GPT2ForSequenceClassification's score layer reads the last non-pad token."""
    reference = checkpoint("GPT2ForSequenceClassification", CONFIGS[1], tokenizer, tmp_path,
                           num_labels=3)
    inputs = batch(tokenizer, TEXT[:4])
    assert_classifier_round_trips(GPT2, reference, tmp_path, tokenizer, inputs, tmp_path)


def test_cached_decoding_gives_the_full_pass_logits(tokenizer):
    """Feeding a left-padded batch one token at a time through the caches equals one pass."""
    config = GPTConfig(vocab_size=tokenizer.vocab_size, **CONFIGS[0])
    net = randomize_(GPTLMHeadModel(config))
    inputs = left_padded(batch(tokenizer, TEXT[:3]), tokenizer.special.pad)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    with torch.no_grad():
        full = net.logits(net(ids, mask).last_hidden_state)
        caches = net.new_caches()
        steps = [net.logits(net(ids[:, t:t + 1], mask[:, :t + 1], caches=caches)
                            .last_hidden_state) for t in range(ids.shape[1])]
    assert_close(torch.cat(steps, 1), full, mask)
    assert caches[0].self_attention.length == ids.shape[1]
    with pytest.raises(ValueError, match="n_positions"):
        net(torch.ones(1, 68, dtype=torch.long))


def test_gpt2_small_has_the_papers_size():
    """GPT-2 small: 124M parameters with the 50,257-token vocabulary (117M as the paper counted)."""
    from omegaconf import OmegaConf

    from bench.run import CONF_DIR
    from lit_models.core.build import net_config

    preset = OmegaConf.load(CONF_DIR / "model" / "gpt2-small.yaml")
    with torch.device("meta"):
        net = GPTLMHeadModel(net_config(GPT2, preset, preset.vocab_size, 1))
    assert sum(p.numel() for p in net.parameters()) == 124_439_808
