"""ELMo's biLM pretraining end to end at tiny size on the Wikipedia sample: held-out perplexity
falls with training (both directions; with the sampled softmax too), the record's perplexities
are the exponentials of its per-word losses, and the biLM a run writes loads back as it was."""

import math

import pytest
import torch

from datamodules.bilm import collate_sentences
from datamodules.words import BOS, EOS
from lit_models.families.bilm import load_elmo, occurrence_vectors
from tests.bench.invoke import plmbench_on_mirror, read, records_under

CAPS = ["model=elmo-tiny", "task=pretrain/wikipedia", "task.max_train_samples=40",
        "task.eval_documents=5", "task.max_length=24", "trainer.enable_progress_bar=false"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    records = {}
    for name, extra in ((0, ["trainer.max_steps=0"]), (25, ["trainer.max_steps=25"]),
                        ("sampled", ["trainer.max_steps=25", "model.softmax_samples=64"])):
        result, results = plmbench_on_mirror(tmp_path_factory, "wikipedia_en_sample", "run",
                                             *CAPS, *extra)
        assert result.rc == 0, result.err[-2000:]
        [path] = records_under(results)
        records[name] = read(path.parent)
    return records


def test_held_out_perplexity_falls_in_both_directions(runs):
    before, after = runs[0]["metrics"]["heldout"], runs[25]["metrics"]["heldout"]
    assert runs[25]["steps"] == 25 and runs[25]["board"] == "pretrain"
    vocab = runs[0]["config"]["model"]["vocab_size"]
    assert before["perplexity"] > 0.5 * vocab  # untrained: about uniform over the softmax
    for key in ("forward_perplexity", "backward_perplexity", "perplexity"):
        assert after[key] < 0.5 * before[key], key


def test_a_sampled_softmax_trains_too_and_is_scored_with_the_full_one(runs):
    """64 log-uniform noise words a step (of a vocabulary of hundreds): held-out perplexity,
    always the full softmax's, falls as with the full softmax."""
    sampled, full = runs["sampled"], runs[25]
    assert sampled["config"]["model"]["softmax_samples"] == 64
    assert 64 < sampled["config"]["model"]["vocab_size"]
    before = runs[0]["metrics"]["heldout"]["perplexity"]
    assert sampled["metrics"]["heldout"]["perplexity"] < 0.5 * before
    assert sampled["metrics"]["heldout"]["perplexity"] != full["metrics"]["heldout"]["perplexity"]


def test_the_perplexities_are_the_losses_exponentials(runs):
    m = runs[25]["metrics"]["heldout"]
    assert m["forward_perplexity"] == pytest.approx(math.exp(m["forward_loss"]), rel=1e-5)
    assert m["backward_perplexity"] == pytest.approx(math.exp(m["backward_loss"]), rel=1e-5)
    assert m["perplexity"] == pytest.approx((m["forward_perplexity"]
                                             + m["backward_perplexity"]) / 2)
    assert m["loss"] == pytest.approx((m["forward_loss"] + m["backward_loss"]) / 2)


def test_the_saved_bilm_loads_back_and_reads_contexts(runs):
    net, vocab = load_elmo(f"ckpt:{runs[25]['run_dir']}")
    assert len(vocab) == net.config.vocab_size == runs[25]["config"]["model"]["vocab_size"]
    assert sum(p.numel() for p in net.parameters()) == runs[25]["parameters"]
    sentences = [["The", "cat", "sat", "."], ["A", "cat", "."]]
    places, vectors = occurrence_vectors(net.encoder, sentences, "cat", layer=-1)
    assert places == [(0, 1), (1, 1)]
    batch = collate_sentences([{"input_ids": [0] * 6, "words": f"{BOS} The cat sat . {EOS}"}], 0)
    with torch.no_grad():
        alone = net.encoder.eval()(batch["char_ids"]).layers[-1, 0, 2]
    assert torch.allclose(vectors[0], alone, atol=1e-5)
