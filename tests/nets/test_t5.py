"""T5 against transformers: random transformers checkpoints imported with ``from_hf`` give the
same decoder ``last_hidden_state`` (T5Model) and LM logits (T5ForConditionalGeneration) to 1e-5
in float32 on padded batches, for T5 (ReLU, tied and scaled output layer) and v1.1 (gated GELU,
an output layer of its own, unscaled); the relative position buckets follow §2.1; the presets
have the papers' sizes (exports of both, cached decoding and the other contracts:
``tests/contracts``)."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from datamodules.collate import pad_collate
from datamodules.tokenization import TextTokenizer, save_tokenizer, train_tokenizer
from lit_models.archs import get_arch
from lit_models.interop.hf import from_hf
from lit_models.nets.t5 import (
    T5ForConditionalGeneration,
    T5Model,
    relative_position_bucket,
)
from tests.conftest import require
from tests.nets.parity import TEXT, TOLERANCE, max_diff, randomize_

transformers = require("transformers")

T5 = get_arch("t5")
#: sizes no other test uses: heads x d_kv != d_model, unequal stacks, few buckets and a short
#: max distance (so that logarithmic and far buckets occur in short batches)
CONFIGS = [
    dict(d_model=36, d_kv=10, d_ff=44, num_layers=2, num_decoder_layers=3, num_heads=3,
         relative_attention_num_buckets=8, relative_attention_max_distance=20),
    dict(d_model=32, d_kv=8, d_ff=40, num_layers=1, num_heads=4, feed_forward_proj="gated-gelu",
         relative_attention_num_buckets=12, relative_attention_max_distance=40,
         layer_norm_epsilon=1e-5),
]


@pytest.fixture(scope="module")
def tokenizer() -> TextTokenizer:
    return train_tokenizer(T5.tokenizer, TEXT, vocab_size=300, lowercase=False)


def inputs(tokenizer: TextTokenizer, sources: list[str], targets: list[str]) -> dict:
    """A padded source batch and right-padded decoder inputs of other lengths."""
    encode, pad = tokenizer.backend.encode_batch, tokenizer.special.pad
    batch = pad_collate([{"input_ids": e.ids} for e in encode(sources)], pad)
    decoder = pad_collate([{"input_ids": [pad, *e.ids]} for e in encode(targets)], pad)
    batch["decoder_input_ids"] = decoder["input_ids"]
    batch["decoder_mask"] = decoder["attention_mask"]
    assert (batch["attention_mask"] == 0).any() and (decoder["attention_mask"] == 0).any()
    return batch


def checkpoint(cls_name: str, sizes: dict, tokenizer: TextTokenizer, directory: Path,
               own_head: bool = False) -> torch.nn.Module:
    """A random transformers T5 saved with save_pretrained, beside our tokenizer files;
    ``own_head``: an output layer apart from the shared embeddings (v1.1)."""
    special = tokenizer.special
    config = transformers.T5Config(
        vocab_size=tokenizer.vocab_size, pad_token_id=special.pad, eos_token_id=special.sep,
        decoder_start_token_id=special.pad, dropout_rate=0.0,
        tie_word_embeddings=not sizes.get("feed_forward_proj", "").startswith("gated"), **sizes)
    model = randomize_(getattr(transformers, cls_name)(config))
    if own_head:
        model.lm_head.weight = torch.nn.Parameter(0.3 * torch.randn_like(model.lm_head.weight))
    model.save_pretrained(directory)
    save_tokenizer(tokenizer, directory, 512)
    return getattr(transformers, cls_name).from_pretrained(directory).eval()


def close(ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor) -> float:
    """max |ours - theirs| over the positions ``mask`` keeps (decoder pads differ: causal)."""
    assert ours[mask.bool()].std() > 0.01  # the random weights make the outputs vary
    return max_diff(ours, theirs, mask)


@pytest.mark.parametrize("sizes", CONFIGS)
def test_from_hf_matches_t5_model(sizes, tokenizer, tmp_path):
    reference = checkpoint("T5Model", sizes, tokenizer, tmp_path)
    _, net, loaded = from_hf(tmp_path)
    assert isinstance(net, T5Model) and loaded.special == tokenizer.special
    batch = inputs(tokenizer, TEXT[:4], TEXT[5:9])
    keep = batch.pop("decoder_mask")
    with torch.no_grad():
        ours = net.eval()(**batch)
        theirs = reference(**batch)
    assert close(ours.last_hidden_state, theirs.last_hidden_state, keep) <= TOLERANCE
    assert close(ours.encoder_last_hidden_state, theirs.encoder_last_hidden_state,
                 batch["attention_mask"]) <= TOLERANCE


@pytest.mark.parametrize(("sizes", "own_head"), [(CONFIGS[0], False), (CONFIGS[1], True),
                                                 (CONFIGS[1], False)])
def test_from_hf_matches_t5_for_conditional_generation(sizes, own_head, tokenizer, tmp_path):
    """T5 (tied, scaled), v1.1 with its own output layer (unscaled), and transformers 5's v1.1
    built without one (tied, unscaled)."""
    reference = checkpoint("T5ForConditionalGeneration", sizes, tokenizer, tmp_path, own_head)
    assert ("lm_head.weight" in load_file(tmp_path / "model.safetensors")) == own_head
    _, net, _ = from_hf(tmp_path, with_heads=True)
    assert isinstance(net, T5ForConditionalGeneration) and (net.lm_head is not None) == own_head
    assert net.config.scale_decoder_outputs == reference.config.scale_decoder_outputs
    batch = inputs(tokenizer, TEXT[2:6], TEXT[:4])
    keep = batch.pop("decoder_mask")
    with torch.no_grad():
        ours = net.logits(net.eval()(**batch).last_hidden_state)
        theirs = reference(**batch).logits
    assert close(ours, theirs, keep) <= TOLERANCE


def test_relative_position_buckets_follow_the_definition():
    """§2.1 with 32 buckets up to 128: bidirectional, offsets 0..7 exact, keys after the query in
    buckets 16 on; 8..127 logarithmic; beyond 128 one bucket per direction. Causal: only the
    past counts, 0..15 exact."""
    offsets = torch.tensor([0, -1, -7, -8, -15, -16, -127, -128, -1000, 1, 7, 8, 128, 1000])
    both = relative_position_bucket(offsets, True, 32, 128).tolist()
    assert both[:3] == [0, 1, 7] and both[9:11] == [17, 23]
    assert all(8 <= b <= 15 for b in both[3:9]) and both[7] == both[8] == 15
    assert all(24 <= b <= 31 for b in both[11:]) and both[12] == both[13] == 31
    assert both[3] < both[5] < both[6]  # wider ranges farther away
    causal = relative_position_bucket(offsets, False, 32, 128).tolist()
    assert causal[:5] == [0, 1, 7, 8, 15] and causal[8] == 31 and causal[9:] == [0] * 5


@pytest.mark.parametrize(("preset", "parameters"), [("t5-small-scratch", 60_506_624),
                                                     ("t5-base-scratch", 222_903_552)])
def test_presets_have_the_papers_sizes(preset, parameters):
    """T5-small ~60M and T5-base ~220M (§3.7, Table 14), with the 32,128-entry vocabulary."""
    from omegaconf import OmegaConf

    from bench.run.execute import CONF_DIR
    from lit_models.core.build import net_config

    cfg = OmegaConf.load(CONF_DIR / "model" / f"{preset}.yaml")
    with torch.device("meta"):
        net = T5ForConditionalGeneration(net_config(T5, cfg, cfg.vocab_size, 0))
    assert sum(p.numel() for p in net.parameters()) == parameters
