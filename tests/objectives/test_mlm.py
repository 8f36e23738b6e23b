"""BERT masking (Devlin et al. 2019, §3.1 Task #1, Appendix A.1), RoBERTa static vs dynamic
masking (Liu et al. 2019, §4.1) and the masked-positions-only loss, on hand-built tensors."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from datamodules.errors import PlmbenchError
from datamodules.tokenization import VOCAB_TXT, SpecialTokens, TextTokenizer, load_tokenizer
from lit_models.objectives.mlm import (
    IGNORE_INDEX,
    MaskingConfig,
    MLMCollator,
    mask_tokens,
    masked_lm_loss,
)

IDS = SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=4)
N_SPECIAL = 5  # ids 0..4 are special in every test vocabulary


def special_flags(vocab_size: int) -> torch.Tensor:
    flags = torch.zeros(vocab_size, dtype=torch.bool)
    flags[:N_SPECIAL] = True
    return flags


def padded_batch(rows: int, length: int, vocab_size: int) -> torch.Tensor:
    """[CLS] random tokens [SEP] [PAD]..., rows of random lengths (at least [CLS] x [SEP])."""
    ids = torch.randint(N_SPECIAL, vocab_size, (rows, length))
    lengths = torch.randint(3, length + 1, (rows,))
    ids[torch.arange(length) >= lengths[:, None]] = IDS.pad
    ids[:, 0] = IDS.cls
    ids[torch.arange(rows), lengths - 1] = IDS.sep
    return ids


def test_selection_budget_and_80_10_10_split() -> None:
    torch.manual_seed(0)
    vocab_size = 30_000
    ids = padded_batch(2000, 128, vocab_size)
    generator = torch.Generator().manual_seed(0)
    corrupted, labels = mask_tokens(
        ids, special_flags(vocab_size), MaskingConfig(), vocab_size, IDS.mask, generator
    )
    selected = labels != IGNORE_INDEX
    # exactly max(1, round(n * 0.15)) of the n non-special tokens per row, never a special one
    n_candidates = (ids >= N_SPECIAL).sum(1).tolist()
    assert selected.sum(1).tolist() == [max(1, round(n * 0.15)) for n in n_candidates]
    assert not (selected & (ids < N_SPECIAL)).any()
    assert torch.equal(labels[selected], ids[selected])
    assert torch.equal(corrupted[~selected], ids[~selected])
    # of ~38k selected: 80% [MASK], 10% random (1/V of which equal the original), 10% unchanged
    picked, original = corrupted[selected], ids[selected]
    masked = (picked == IDS.mask).float().mean().item()
    unchanged = (picked == original).float().mean().item()
    assert abs(masked - 0.8) < 0.01
    assert abs(unchanged - 0.1) < 0.01
    assert abs(1 - masked - unchanged - 0.1) < 0.01
    assert (corrupted[selected & (corrupted != IDS.mask)] >= N_SPECIAL).all()


def test_random_replacements_uniform_over_non_special_ids() -> None:
    torch.manual_seed(0)
    vocab_size = 25
    ids = padded_batch(1000, 256, vocab_size)
    everything_random = MaskingConfig(mlm_probability=1.0, mask_token_rate=0.0,
                                      random_token_rate=1.0)
    generator = torch.Generator().manual_seed(1)
    corrupted, labels = mask_tokens(
        ids, special_flags(vocab_size), everything_random, vocab_size, IDS.mask, generator
    )
    selected = labels != IGNORE_INDEX
    assert torch.equal(selected, ids >= N_SPECIAL)
    counts = torch.bincount(corrupted[selected], minlength=vocab_size)
    assert counts[:N_SPECIAL].sum() == 0
    expected = selected.sum() / (vocab_size - N_SPECIAL)  # ~6400 per id, std ~80
    assert ((counts[N_SPECIAL:] / expected - 1).abs() < 0.05).all()


def test_whole_word_masking_selects_every_piece_of_a_word() -> None:
    torch.manual_seed(0)
    vocab_size = 1000
    continuation = torch.zeros(vocab_size, dtype=torch.bool)
    continuation[600:] = True  # ids 600.. are "##" pieces: ~40% of tokens continue a word
    ids = padded_batch(2000, 128, vocab_size)
    word_starts = ~continuation[ids]
    cfg = MaskingConfig(whole_word=True)
    generator = torch.Generator().manual_seed(0)
    _, labels = mask_tokens(
        ids, special_flags(vocab_size), cfg, vocab_size, IDS.mask, generator, word_starts
    )
    selected = labels != IGNORE_INDEX
    assert not (selected & (ids < N_SPECIAL)).any()
    # a continuation piece is selected exactly when the token before it is (same word)
    pieces = ~word_starts[:, 1:] & (ids[:, 1:] >= N_SPECIAL) & (ids[:, :-1] >= N_SPECIAL)
    assert torch.equal(selected[:, 1:][pieces], selected[:, :-1][pieces])
    # BERT's greedy rule: never over the budget, and (words of 1-4 pieces) almost always on it
    budget = torch.tensor([max(1, round(n * 0.15)) for n in (ids >= N_SPECIAL).sum(1).tolist()])
    assert (selected.sum(1) <= budget).all()
    assert selected.sum() / budget.sum() > 0.99
    # the property is not vacuous: token-level masking splits words
    _, token_labels = mask_tokens(
        ids, special_flags(vocab_size), MaskingConfig(), vocab_size, IDS.mask, generator
    )
    token_selected = token_labels != IGNORE_INDEX
    assert not torch.equal(token_selected[:, 1:][pieces], token_selected[:, :-1][pieces])


@pytest.fixture(scope="module")
def toy_tokenizer(tmp_path_factory) -> TextTokenizer:
    """BERT's five specials at ids 0..4 (as IDS), then 95 words: a vocabulary of 100."""
    directory = tmp_path_factory.mktemp("vocab")
    words = [f"w{i}" for i in range(N_SPECIAL, 100)]
    (directory / "vocab.txt").write_text("".join(f"{t}\n" for _, t in VOCAB_TXT.tokens)
                                         + "".join(f"{w}\n" for w in words))
    tokenizer = load_tokenizer(directory)
    assert tokenizer.special == IDS and tokenizer.vocab_size == 100
    return tokenizer


@pytest.fixture
def collator(toy_tokenizer):
    def make(cfg: MaskingConfig, seed: int = 0) -> MLMCollator:
        return MLMCollator(toy_tokenizer, cfg, seed=seed)

    return make


def examples(n: int, seeds: bool = False) -> list[dict]:
    out = []
    for i in range(n):
        tokens = torch.randint(N_SPECIAL, 100, (10 + 7 * i,)).tolist()
        example = {"input_ids": [IDS.cls, *tokens, IDS.sep], "token_type_ids": [0] * (12 + 7 * i),
                   "next_sentence_label": i % 2}
        out.append({**example, "mask_seed": 1000 + i} if seeds else example)
    return out


def test_collator_dynamic_masks_differ_between_calls(collator) -> None:
    torch.manual_seed(0)
    batch_examples = examples(8)
    masker = collator(MaskingConfig())
    first, second = masker(batch_examples), masker(batch_examples)
    assert set(first) == {"input_ids", "attention_mask", "token_type_ids", "labels",
                          "next_sentence_label", "label_positions"}
    # the masked tokens' flat indices, found on the host so the loss never asks the device
    assert torch.equal(first["label_positions"],
                       (first["labels"].flatten() != IGNORE_INDEX).nonzero().squeeze(1))
    assert first["labels"].shape == first["input_ids"].shape == (8, 12 + 7 * 7)
    assert torch.equal(first["next_sentence_label"], torch.tensor([0, 1] * 4))
    assert (first["labels"][first["attention_mask"] == 0] == IGNORE_INDEX).all()
    assert not torch.equal(first["labels"], second["labels"])
    # a fresh collator with the same seed repeats the first call
    assert torch.equal(collator(MaskingConfig())(batch_examples)["labels"], first["labels"])


def test_collator_static_mask_depends_only_on_mask_seed(collator) -> None:
    torch.manual_seed(0)
    a, b, c = examples(3, seeds=True)
    masker = collator(MaskingConfig(static=True))
    alone, with_longer = masker([a]), masker([c, a])  # another call, batch and padding
    n = len(a["input_ids"])
    assert torch.equal(alone["labels"][0], with_longer["labels"][1, :n])
    assert torch.equal(alone["input_ids"][0], with_longer["input_ids"][1, :n])
    assert "mask_seed" not in alone
    reseeded = masker([{**a, "mask_seed": 7}])  # another copy of the same text
    assert not torch.equal(reseeded["labels"], alone["labels"])
    with pytest.raises(PlmbenchError, match="mask_seed"):
        masker([{k: v for k, v in b.items() if k != "mask_seed"}])


def test_dataloader_workers_draw_different_masks(collator) -> None:
    torch.manual_seed(0)
    same = examples(1) * 16  # identical examples: any difference comes from the generators
    loader = DataLoader(same, batch_size=8, num_workers=2, collate_fn=collator(MaskingConfig()),
                        generator=torch.Generator().manual_seed(0))
    from_worker_0, from_worker_1 = list(loader)  # batches are dealt to workers in turn
    assert not torch.equal(from_worker_0["labels"], from_worker_1["labels"])


class RowCounter(nn.Module):
    """A vocabulary head that records how many rows it was given."""

    def __init__(self, hidden: int, vocab: int) -> None:
        super().__init__()
        self.decoder = nn.Linear(hidden, vocab)
        self.rows: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.rows.append(x.shape[0])
        return self.decoder(x)


def test_masked_lm_loss_is_cross_entropy_at_masked_positions_only() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(4, 16, 32)
    labels = torch.randint(0, 50, (4, 16)).masked_fill(torch.rand(4, 16) > 0.15, IGNORE_INDEX)
    head = RowCounter(32, 50)
    loss = masked_lm_loss(hidden, labels, head)
    n_masked = int((labels != IGNORE_INDEX).sum())
    assert head.rows == [n_masked]
    # independent: full [B, T, V] logits, mean negative log-likelihood over masked positions
    log_probs = head.decoder(hidden).log_softmax(-1)
    where = labels != IGNORE_INDEX
    expected = -log_probs[where].gather(1, labels[where][:, None]).mean()
    assert torch.allclose(loss, expected, atol=1e-6)
    assert torch.allclose(loss, F.cross_entropy(head.decoder(hidden).transpose(1, 2), labels))
    nothing = masked_lm_loss(hidden, torch.full_like(labels, IGNORE_INDEX), head)
    assert nothing.item() == 0.0 and nothing.requires_grad


class NoMask:
    """A tokenizer whose config names no mask token."""

    special = SpecialTokens(pad=0, unk=1, cls=2, sep=3, mask=None)


def test_bad_settings_raise_one_line_errors() -> None:
    with pytest.raises(PlmbenchError, match="random_token_rate"):
        MaskingConfig(mask_token_rate=0.9, random_token_rate=0.2)
    with pytest.raises(PlmbenchError, match="mask_token"):
        MLMCollator(NoMask(), MaskingConfig())
    with pytest.raises(PlmbenchError, match="vocabulary"):
        mask_tokens(torch.zeros(1, 3, dtype=torch.long), torch.zeros(7, dtype=torch.bool),
                    MaskingConfig(), 8, IDS.mask)
