"""The attention statistics (lit_models/families/attention_stats.py) against loops over the maps.

Random attention maps (each row a distribution over the real keys) of a padded batch with a
[CLS]-like and a [SEP]-like token: every per-head average (to [CLS], [SEP], punctuation, the
previous / next / same token, entropy, argmax offsets, the rarest token) equals a plain Python
loop over queries; word-level attention sums over a word's tokens as keys and averages over them
as queries (Clark et al. 2019, §4.1); each head's dependency predictions are the argmax words, in
both directions, never the word itself; the dependency table scores them against gold heads and
fixed offsets as Clark et al.'s notebook does."""

import math

import pytest
import torch

from lit_models.families.attention_analysis import dependency_table
from lit_models.families.attention_stats import attention_sums, head_predictions, word_attention

CLS, SEP, PAD, COMMA = 1, 2, 0, 3
VOCAB = 12


def random_maps(mask: torch.Tensor, layers: int = 2, heads: int = 3, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    B, T = mask.shape
    maps = []
    for _ in range(layers):
        scores = torch.randn(B, heads, T, T, generator=generator) * 3
        scores = scores.masked_fill(~mask.bool()[:, None, None, :], float("-inf"))
        maps.append(scores.softmax(-1))
    return maps


@pytest.fixture
def batch():
    ids = torch.tensor([[CLS, 5, COMMA, 7, 5, SEP, 9, SEP],
                        [CLS, 8, 6, SEP, 4, SEP, PAD, PAD]])
    mask = (ids != PAD).long()
    return ids, mask


def test_every_average_equals_a_loop_over_the_queries(batch):
    ids, mask = batch
    maps = random_maps(mask)
    special = torch.zeros(VOCAB, dtype=torch.bool)
    special[[PAD, CLS, SEP]] = True
    punctuation = torch.zeros(VOCAB, dtype=torch.bool)
    punctuation[COMMA] = True
    frequencies = torch.arange(VOCAB, dtype=torch.float).flip(0)  # higher id: rarer
    sums = attention_sums(maps, ids, mask, CLS, SEP, special, punctuation, frequencies)
    for layer, a in enumerate(maps):
        for head in range(3):
            totals = dict.fromkeys(("cls", "sep", "punct", "prev", "next", "self", "entropy",
                                    "argprev", "argnext", "rare"), 0.0)
            counts = dict.fromkeys(("all", "prev", "next", "content"), 0)
            for b in range(2):
                n = int(mask[b].sum())
                content = [j for j in range(n) if ids[b, j] not in (CLS, SEP)]
                rarest = max(content, key=lambda j: int(ids[b, j]))  # highest id = rarest
                for i in range(n):
                    row = a[b, head, i, :n].tolist()
                    counts["all"] += 1
                    totals["cls"] += sum(row[j] for j in range(n) if ids[b, j] == CLS)
                    totals["sep"] += sum(row[j] for j in range(n) if ids[b, j] == SEP)
                    totals["punct"] += sum(row[j] for j in range(n) if ids[b, j] == COMMA)
                    totals["self"] += row[i]
                    totals["entropy"] -= sum(p * math.log(p) for p in row if p > 0)
                    best = max(range(n), key=row.__getitem__)
                    if i > 0:
                        counts["prev"] += 1
                        totals["prev"] += row[i - 1]
                        totals["argprev"] += best == i - 1
                    if i < n - 1:
                        counts["next"] += 1
                        totals["next"] += row[i + 1]
                        totals["argnext"] += best == i + 1
                    if i in content:
                        counts["content"] += 1
                        totals["rare"] += best == rarest
            expected = {"cls": ("cls", "all"), "sep": ("sep", "all"),
                        "punctuation": ("punct", "all"), "previous": ("prev", "prev"),
                        "next": ("next", "next"), "self": ("self", "all"),
                        "entropy": ("entropy", "all"), "argmax_previous": ("argprev", "prev"),
                        "argmax_next": ("argnext", "next"), "rarest": ("rare", "content")}
            for name, (total, count) in expected.items():
                ours = float(sums[name][layer, head] / sums[f"{name}_n"])
                assert ours == pytest.approx(totals[total] / counts[count], abs=1e-5), name
    assert float(sums["uniform_entropy"] / sums["uniform_entropy_n"]) == pytest.approx(
        (8 * math.log(8) + 6 * math.log(6)) / 14)


def test_word_attention_sums_over_keys_and_averages_over_queries():
    # tokens: [CLS] w0 w1a w1b w2 [SEP]
    word_ids = torch.tensor([[-1, 0, 1, 1, 2, -1]])
    a = torch.rand(1, 1, 6, 6)
    a = a / a.sum(-1, keepdim=True)
    words = word_attention(a, word_ids, 3)[0, 0]
    tokens = {0: [1], 1: [2, 3], 2: [4]}
    for i in range(3):
        for j in range(3):
            expected = sum(float(a[0, 0, t, u]) for t in tokens[i] for u in tokens[j]) / len(
                tokens[i])
            assert float(words[i, j]) == pytest.approx(expected, abs=1e-6)


def test_heads_predict_the_most_attended_word_and_the_table_scores_them():
    # one sentence of 3 words, no special tokens; gold heads: w0 -> w1, w1 root, w2 -> w1
    word_ids = torch.tensor([[0, 1, 2]])
    perfect = torch.tensor([[0.1, 0.8, 0.1], [0.5, 0.0, 0.5], [0.1, 0.8, 0.1]])
    self_loving = torch.tensor([[0.9, 0.05, 0.05], [0.1, 0.1, 0.8], [0.0, 0.1, 0.9]])
    maps = [torch.stack([perfect, self_loving])[None]]  # 1 layer, 2 heads
    predictions = head_predictions(maps, word_ids)[0]  # [layers, heads, 2, W]
    assert predictions[0, 0, 0].tolist() == [1, 0, 1]  # dep->head: argmax of each row
    assert predictions[0, 0, 1].tolist() == [1, 0, 1]  # head<-dep: argmax of each column
    assert predictions[0, 1, 0].tolist() == [1, 2, 1]  # itself excluded: second best
    tree = {"words": ["a", "b", "c"], "heads": [2, 0, 2], "relations": ["det", "root", "det"]}
    table = dependency_table([tree], [predictions], min_count=1)
    det = table["relations"]["det"]
    assert det["accuracy"] == 1.0 and (det["layer"], det["head"]) == (0, 0)
    # offsets -3..2: word i's head is word i + offset; w0 -> w1 is +1, w2 -> w1 is -1
    assert det["baseline"] == 0.5
    assert table["relations"]["all"]["accuracy"] == pytest.approx(2 / 3)  # root never right
    assert "root" not in table["relations"]
    assert table["accuracy"]["dep->head"] == [[pytest.approx(2 / 3), pytest.approx(2 / 3)]]
