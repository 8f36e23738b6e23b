"""SpanBERT's span masking and span boundary objective (Joshi et al. 2020, §3.1-3.2): span
lengths, the masking budget, whole words, 80/10/10 per span, boundaries, and a loss that falls."""

import random

import pytest
import torch
from omegaconf import OmegaConf

from bench.run.execute import CONF_DIR
from datamodules.errors import PlmbenchError
from datamodules.tokenization import VOCAB_TXT, train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.nets.bert import BertConfig, BertForPreTraining
from lit_models.nets.spanbert import SpanBertConfig, SpanBertForPreTraining
from lit_models.objectives.mlm import IGNORE_INDEX
from lit_models.objectives.span import (
    SpanBoundaryObjective,
    SpanMaskingConfig,
    mask_spans,
    span_boundary_loss,
)
from tests.objectives.test_mlm import IDS, N_SPECIAL, padded_batch, special_flags

SBO = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "objective" / "sbo.yaml"))
SBO.pop("_target_")
WORDS = "the a cat dog sat on mat quick brown fox jumped over lazy hello world it was".split()


def masking(**overrides) -> SpanMaskingConfig:
    return SpanBoundaryObjective(**{**SBO, **overrides}).masking


def runs(selected: list[bool]) -> list[tuple[int, int]]:
    """[start, end) of each run of True."""
    spans, start = [], None
    for t, value in enumerate([*selected, False]):
        if value and start is None:
            start = t
        elif not value and start is not None:
            spans.append((start, t))
            start = None
    return spans


def mask_rows(ids: torch.Tensor, word_starts: torch.Tensor, cfg: SpanMaskingConfig, seed=0):
    generator = torch.Generator().manual_seed(seed)
    special = special_flags(30_000)
    return [mask_spans(row, special, starts, cfg, IDS.mask, generator)
            for row, starts in zip(ids, word_starts, strict=True)]


def test_length_distribution_is_geometric_clipped_at_ten():
    probabilities = masking().length_probabilities()
    assert len(probabilities) == 10
    assert abs(probabilities[1] / probabilities[0] - 0.8) < 1e-12
    mean = (torch.arange(1, 11) * probabilities).sum().item()
    assert abs(mean - 3.8) < 0.01  # §3.1: "mean span length 3.8"


def test_budget_span_lengths_and_80_10_10_per_span():
    """Token-level spans on long rows: exactly the budget, observed spans ~ Geo(0.2) on 1..10."""
    torch.manual_seed(0)
    ids = padded_batch(300, 512, 30_000)
    ids[:150, 1:-1] = torch.randint(N_SPECIAL, 30_000, (150, 510))  # half full length
    ids[:150, -1] = IDS.sep
    cfg = masking(whole_word=False)
    rows = mask_rows(ids, torch.ones_like(ids, dtype=torch.bool), cfg)
    lengths, actions = [], []
    for i, (row, out) in enumerate(zip(ids, rows, strict=True)):
        if i == 150:
            n_full_length_spans = len(lengths)
        selected = out.labels != IGNORE_INDEX
        n = int((row >= N_SPECIAL).sum())
        assert int(selected.sum()) == max(1, round(0.15 * n))
        assert not selected[row < N_SPECIAL].any()
        assert torch.equal(out.labels[selected], row[selected])
        for s, e in runs(selected.tolist()):
            lengths.append(e - s)
            assert out.left[s:e].eq(s - 1).all() and out.right[s:e].eq(e).all()
            assert out.offset[s:e].tolist() == list(range(e - s))
            span, original = out.input_ids[s:e], row[s:e]
            actions.append("mask" if span.eq(IDS.mask).all() else
                           "same" if torch.equal(span, original) else "random")
            if actions[-1] == "random":
                assert (span >= N_SPECIAL).all() and not span.eq(IDS.mask).any()
    lengths = torch.tensor(lengths, dtype=torch.float)
    assert lengths.max() <= 10
    full = lengths[:n_full_length_spans]
    # the budget cuts each row's last span (1 in ~20 on full rows): mean 3.8 (§3.1) within 0.15
    assert abs(full.mean().item() - 3.8) < 0.15
    assert abs((full == 1).float().mean().item() - 0.2 / (1 - 0.8**10)) < 0.03
    shares = {a: actions.count(a) / len(actions) for a in ("mask", "same", "random")}
    assert abs(shares["mask"] - 0.8) < 0.02 and abs(shares["same"] - 0.1) < 0.02


def test_spans_are_whole_words():
    """Spans start at a word start and end before one, except where the budget cuts a row's
    last span."""
    torch.manual_seed(1)
    ids = padded_batch(200, 256, 30_000)
    word_starts = torch.rand(ids.shape) < 0.5  # words of two pieces on average
    rows = mask_rows(ids, word_starts, masking(whole_word=True), seed=1)
    for row_starts, out in zip(word_starts, rows, strict=True):
        spans = runs((out.labels != IGNORE_INDEX).tolist())
        for s, _ in spans:
            assert row_starts[s] or out.input_ids[s - 1] < N_SPECIAL
        mid_word = [e for _, e in spans if not row_starts[e] and out.input_ids[e] >= N_SPECIAL]
        assert len(mid_word) <= 1


@pytest.fixture(scope="module")
def tokenizer():
    rng = random.Random(0)
    text = [" ".join(rng.choice(WORDS) for _ in range(12)) + "." for _ in range(200)]
    return train_tokenizer(VOCAB_TXT, text, vocab_size=120, lowercase=True)


def examples(tokenizer, rows: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 30))) for _ in range(rows)]
    return [{"input_ids": e.ids} for e in tokenizer.backend.encode_batch(texts)]


def test_boundary_loss_reads_the_boundary_states(tokenizer):
    objective = SpanBoundaryObjective(**SBO)
    batch = objective.collator(tokenizer, seed=0)(examples(tokenizer, 8, 0))
    B, T = batch["input_ids"].shape
    hidden = torch.arange(B * T, dtype=torch.float).view(B, T, 1)  # state = flat position
    seen = {}

    def head(left, right, offset):
        seen.update(left=left, right=right, offset=offset)
        return torch.zeros(len(left), tokenizer.vocab_size)

    loss = span_boundary_loss(hidden, batch, head)
    assert torch.isclose(loss, torch.tensor(tokenizer.vocab_size).float().log())
    rows, cols = (batch["labels"] != IGNORE_INDEX).nonzero(as_tuple=True)
    assert torch.equal(seen["left"].squeeze(1), (rows * T + batch["span_left"][rows, cols]).float())
    assert (seen["left"].squeeze(1) < rows * T + cols).all()
    assert (seen["right"].squeeze(1) > rows * T + cols).all()
    # boundaries are never masked themselves
    left = batch["labels"][rows, batch["span_left"][rows, cols]]
    right = batch["labels"][rows, batch["span_right"][rows, cols]]
    assert (left == IGNORE_INDEX).all() and (right == IGNORE_INDEX).all()


def test_eval_masks_are_fixed_by_mask_seed(tokenizer):
    collate = SpanBoundaryObjective(**SBO).collator(tokenizer, seed=0)
    seeded = [{**e, "mask_seed": 7 + i} for i, e in enumerate(examples(tokenizer, 4, 3))]
    first, second = collate(seeded), collate(seeded)
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not torch.equal(first["labels"], collate(examples(tokenizer, 4, 3))["labels"])


def test_checks_the_heads(tokenizer):
    bert = BertForPreTraining(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=8))
    with pytest.raises(PlmbenchError, match="span boundary head"):
        SpanBoundaryObjective(**SBO).check(Model(get_arch("bert"), bert, tokenizer))
    SpanBoundaryObjective(**{**SBO, "sbo": False}).check(Model(get_arch("bert"), bert, tokenizer))
    with pytest.raises(PlmbenchError, match="geometric_p"):
        SpanBoundaryObjective(**{**SBO, "geometric_p": 0.0})


def test_tiny_pretraining_run_lowers_both_losses(tokenizer):
    torch.manual_seed(0)
    net = SpanBertForPreTraining(SpanBertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))
    objective = SpanBoundaryObjective(**SBO)
    objective.check(Model(get_arch("spanbert"), net, tokenizer))
    collate = objective.collator(tokenizer, seed=0)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3)
    history = []
    for step in range(40):
        losses = objective.losses(net, collate(examples(tokenizer, 16, step)))
        optimizer.zero_grad()
        sum(losses.values()).backward()
        optimizer.step()
        history.append([losses["mlm_loss"].item(), losses["sbo_loss"].item()])
    start, end = torch.tensor(history[:5]).mean(0), torch.tensor(history[-5:]).mean(0)
    assert (end < 0.8 * start).all(), (start, end)
