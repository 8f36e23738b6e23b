"""Frozen ELMo features computed once per sentence (lit_models/core/feature_cache.py): a BiLSTM +
ELMo model's outputs and gradients are those it computes without the cache (to 1e-6), whatever
batches the sentences meet in; the biLM runs only on sentences not seen before; changing its
weights empties the cache; past the budget rows are recomputed, correctly."""

import torch

from datamodules.word_inputs import WordInputs
from lit_models.core.feature_cache import FeatureCache
from lit_models.families.bilstm import BiLSTMModel
from lit_models.families.bilstm_inputs import ElmoInput
from lit_models.nets.bilstm import BiLSTMClassifier, BiLSTMConfig
from lit_models.nets.elmo import ElmoConfig, ElmoEncoder

SENTENCES = [["a", "cat", "sat"], ["the", "dog", "ran", "far", "away"], ["one"],
             ["words", "of", "a", "longer", "sentence", "here", "too"], ["a", "cat", "sat"]]
#: batches of those sentences, each met again in other company and at other widths
BATCHES = [[0, 1], [2, 3, 4], [1, 0, 3], [4, 2], [3, 3, 1]]


def model(cache: FeatureCache | None) -> BiLSTMModel:
    torch.manual_seed(0)
    elmo = ElmoEncoder(ElmoConfig(vocab_size=30, char_filters=((1, 4), (2, 4), (3, 6)),
                                  num_highway=1, projection_dim=8, cell_dim=16))
    inputs = torch.nn.ModuleList([ElmoInput(elmo, dropout=0.0, cache=cache)])
    head = BiLSTMClassifier(BiLSTMConfig(input_dim=16, hidden_size=6, num_layers=1,
                                         classifier_hidden=5, dropout=0.0))
    return BiLSTMModel(inputs, head).train()


def steps(net: BiLSTMModel) -> list[tuple[torch.Tensor, list[torch.Tensor]]]:
    side = WordInputs(chars=True, max_words=40).side
    results = []
    for rows in BATCHES:
        scores = net(side([SENTENCES[r] for r in rows], ""))
        trained = [p for p in net.parameters() if p.requires_grad]
        results.append((scores, torch.autograd.grad(scores.square().sum(), trained)))
    return results


def count_rows(net: BiLSTMModel) -> list[int]:
    rows = []
    encoder = net.inputs[0].features.encoder
    encoder.register_forward_hook(lambda module, args, kwargs, out: rows.append(
        kwargs["char_ids"].shape[0]), with_kwargs=True)
    return rows


def test_cached_features_give_the_same_outputs_and_gradients():
    uncached, cached = model(None), model(FeatureCache(2**20))
    computed, read = count_rows(uncached), count_rows(cached)
    for (a, grads_a), (b, grads_b) in zip(steps(uncached), steps(cached), strict=True):
        assert (a - b).abs().max() <= 1e-6
        for x, y in zip(grads_a, grads_b, strict=True):
            assert (x - y).abs().max() <= 1e-6
    assert computed == [len(rows) for rows in BATCHES]
    assert read == [2, 2]  # sentences 0, 1, then 2 and 3 (4 repeats 0); never again
    cache = cached.inputs[0].features.cache
    assert len(cache.rows) == 4 and cache.bytes == sum(s.nbytes for s in cache.rows.values())
    # a second pass (another epoch, an evaluation) computes nothing
    steps(cached)
    assert read == [2, 2]


def test_changed_weights_empty_the_cache():
    cached, reference = model(FeatureCache(2**20)), model(None)
    read = count_rows(cached)
    steps(cached)
    for net in (cached, reference):
        with torch.no_grad():
            net.inputs[0].features.encoder.token_encoder.projection.weight.mul_(2.0)
    for (a, _), (b, _) in zip(steps(cached), steps(reference), strict=True):
        assert (a - b).abs().max() <= 1e-6
    assert read == [2, 2, 2, 2]


def test_rows_past_the_budget_are_computed_every_time():
    reference, small = model(None), model(FeatureCache(max_bytes=4 * 3 * 16 * 5))
    read = count_rows(small)
    for (a, _), (b, _) in zip(steps(reference), steps(small), strict=True):
        assert (a - b).abs().max() <= 1e-6
    cache = small.inputs[0].features.cache
    assert 0 < cache.bytes <= cache.max_bytes and len(cache.rows) < 4
    assert sum(read) > 4
