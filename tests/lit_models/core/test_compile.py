"""``trainer.compile``: a module whose encoders are compiled takes the same training steps as the
eager one (same losses, same updated weights), keeps its parameter names, and compiles every
encoder it holds (ELECTRA's generator and discriminator).

The compiled runs use the ``aot_eager`` backend: it traces the same graphs as inductor (Dynamo,
AOTAutograd) without generating code, which on this 2-core CPU takes minutes per model."""

import copy

import pytest
import torch

from datamodules.collate import add_label_positions
from lit_models.families.pretrain import LitPretrain
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.electra import ElectraConfig, ElectraForPreTraining
from lit_models.objectives.mlm import MaskedLM, MaskingConfig, mask_tokens
from lit_models.objectives.rtd import ReplacedTokenDetection

VOCAB, SPECIALS, MASK = 64, 5, 4
SIZES = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=32, hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0)
OPTIM = dict(lr=1e-2, weight_decay=0.01, betas=[0.9, 0.999], eps=1e-6, warmup_ratio=0.0,
             schedule="constant", layerwise_lr_decay=1.0)


def batch(seed: int) -> dict:
    """A padded MLM batch with its masked positions, as MLMCollator makes it."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(SPECIALS, VOCAB, (4, 12), generator=g)
    lengths = torch.tensor([12, 9, 12, 7])
    mask = (torch.arange(12)[None] < lengths[:, None]).long()
    ids = ids.masked_fill(mask == 0, 0)
    special = torch.zeros(VOCAB, dtype=torch.bool)
    special[:SPECIALS] = True
    corrupted, labels = mask_tokens(ids, special, MaskingConfig(), VOCAB, MASK, generator=g)
    return add_label_positions({"input_ids": corrupted, "attention_mask": mask,
                                "token_type_ids": torch.zeros_like(ids), "labels": labels})


def train(module: LitPretrain, steps: int) -> list[float]:
    # no weight decay: the compiled graph hands the unused pooler a zero gradient where eager
    # leaves it None, and AdamW decays a weight with a gradient, even a zero one
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2, weight_decay=0.0)
    losses = []
    for step in range(steps):
        loss = sum(module.objective.losses(module.net, batch(step)).values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_compiled_steps_equal_eager_steps():
    torch.manual_seed(0)
    eager = LitPretrain(BertForPreTraining(BertConfig(**SIZES)), MaskedLM(), OPTIM, [])
    compiled = copy.deepcopy(eager)
    assert compiled.compile_encoders(backend="aot_eager") == ["net.bert"]
    assert list(compiled.state_dict()) == list(eager.state_dict())  # checkpoints unchanged
    torch._dynamo.reset()
    expected, got = train(eager, 3), train(compiled, 3)
    assert expected[0] > expected[-1]  # the steps train
    assert got == pytest.approx(expected, abs=1e-5)
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        assert (a - b).abs().max().item() <= 1e-5, name


def test_every_encoder_is_compiled_once():
    """ELECTRA's discriminator and generator are both encoders; a compiled encoder's own
    submodules are not compiled again."""
    net = ElectraForPreTraining(ElectraConfig(**{**SIZES, "embedding_size": 16}))
    module = LitPretrain(net, ReplacedTokenDetection(), OPTIM, [])
    assert module.compile_encoders(backend="aot_eager") == ["net.electra", "net.generator.electra"]
