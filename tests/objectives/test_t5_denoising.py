"""T5's unsupervised objectives (Raffel et al. 2020, §3.3) against the paper's definitions and the
released preprocessors', on many samples: Table 3's example of every encoding; span corruption's
exact noise and span counts for mean span lengths 2, 3, 5, 10 (Table 7) and its uniform random
compositions; the i.i.d. modes' corruption rates at 10-50% (Table 6) and geometric span lengths;
BERT-style's 90/10 mask/random split; the sentinel layout and the rebuilding of the original from
input and target; deshuffling's uniform permutation; prefix LM's uniform split point; T5's
568-token blocks; the loss equals transformers' T5ForConditionalGeneration loss; the FLOPs count
equals torch's FLOP counter on the same step."""

import random
from collections import Counter
from itertools import groupby
from math import comb, sqrt
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from datamodules.collate import IGNORE_INDEX, token_mask
from datamodules.errors import PlmbenchError
from datamodules.tokenization import train_tokenizer
from lit_models.archs import Model, get_arch
from lit_models.interop.hf import to_hf
from lit_models.nets.bart import BartConfig, BartForConditionalGeneration
from lit_models.nets.t5 import T5Config, T5ForConditionalGeneration
from lit_models.objectives.flops import EncoderShape
from lit_models.objectives.noise_masks import SpanConfig, random_spans_noise_mask
from lit_models.objectives.t5_denoising import (
    MODES,
    T5Denoising,
    Vocabulary,
    drop_noise,
    keep_noise,
    mask_or_random,
    mask_tokens,
    sentinel_spans,
    spans_after_sentinels,
)
from tests.conftest import require
from tests.nets.parity import TEXT

CFG = SpanConfig()
DENSITY = {"prefix_lm": None, "deshuffling": None}  # the others: 0.15
WORDS = "Thank you for inviting me to your party last week .".split()
NOISE = [w in ("for", "inviting", "last") for w in WORDS]  # Table 3's corrupted words
LETTERS = Vocabulary(sentinels=("<X>", "<Y>", "<Z>"), mask="<M>", ordinary=("apple",))


def runs(mask: list[bool]) -> list[tuple[bool, int]]:
    """(is noise, length) of each maximal run."""
    return [(key, len(list(group))) for key, group in groupby(mask)]


def objective(mode: str, **settings) -> T5Denoising:
    density = DENSITY.get(mode, 0.15)
    return T5Denoising(mode, **({"noise_density": density} if density else {}) | settings)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(get_arch("t5").tokenizer, TEXT, vocab_size=300, lowercase=False)


@pytest.fixture(scope="module")
def net(tokenizer):
    config = T5Config(vocab_size=tokenizer.vocab_size, d_model=16, d_kv=8, d_ff=24,
                      num_layers=1, num_heads=2, dropout_rate=0.0)  # heads x d_kv = d_model
    return T5ForConditionalGeneration(config).eval()


def corrupted(mode: str, tokenizer, net, length: int, samples: int, **settings):
    """(objective, [(block, input, target)]) of ``samples`` blocks of distinct ordinary ids,
    each corrupted once by the mode's collate (one generator, as dynamic masking draws)."""
    chosen = objective(mode, **settings)
    chosen.check(Model(get_arch("t5"), net, tokenizer))
    collate = chosen.collator(tokenizer, seed=0)
    ordinary = collate.vocabulary.ordinary
    rng = random.Random(1)
    blocks = [rng.sample(ordinary, length) for _ in range(samples)]
    return chosen, [(block, *collate.corrupt(block, collate.randomness.rng({})))
                    for block in blocks]


# --- Table 3: each encoding on the paper's sentence -------------------------------------------

class Draws:
    """A stand-in generator: ``random()`` returns the given draws in turn, ``choice`` the first."""

    def __init__(self, *draws: float) -> None:
        self.draws = list(draws)

    def random(self) -> float:
        return self.draws.pop(0)

    def choice(self, items):
        return items[0]


def test_table_3():
    def text(encoding, *args):
        return " ".join(encoding(WORDS, NOISE, LETTERS, *args))

    assert text(sentinel_spans, None) == "Thank you <X> me to your party <Y> week ."
    assert text(spans_after_sentinels, None) == "<X> for inviting <Y> last <Z>"  # replace spans
    assert text(mask_tokens, None) == "Thank you <M> <M> me to your party <M> week ."  # MASS
    assert text(mask_or_random, Draws(0.5, 0.5, 0.05)) == (  # BERT-style: the 3rd draw < 0.1
        "Thank you <M> <M> me to your party apple week .")
    assert text(drop_noise, None) == "Thank you me to your party week ."  # drop corrupted tokens
    assert text(keep_noise, None) == "for inviting last"
    prefix = [i < 4 for i in range(len(WORDS))]  # prefix LM: the prefix in, the rest out
    assert " ".join(keep_noise(WORDS, prefix, LETTERS, None)) == "Thank you for inviting"
    assert " ".join(drop_noise(WORDS, prefix, LETTERS, None)) == "me to your party last week ."


def test_spans_that_end_the_example_need_no_closing_sentinel():
    noise = NOISE[:-2] + [True, True]  # "week ." corrupted too: the example ends in noise
    assert " ".join(spans_after_sentinels(WORDS, noise, LETTERS, None)) == (
        "<X> for inviting <Y> last week .")
    first = [True] + [False] * (len(WORDS) - 1)  # a first corrupted token: sentinels still align
    assert " ".join(sentinel_spans(WORDS, first, LETTERS, None))[:10] == "<X> you fo"
    assert " ".join(spans_after_sentinels(WORDS, first, LETTERS, None)) == "<X> Thank <Y>"


# --- span corruption (§3.3.4, Table 7) ------------------------------------------------------

@pytest.mark.parametrize("mean", [2.0, 3.0, 5.0, 10.0])
@pytest.mark.parametrize("length", [2, 7, 100, 568])
def test_exact_noise_and_span_counts_alternating_from_kept(length, mean):
    cfg = SpanConfig(0.15, mean)
    noise, spans = cfg.counts(length)
    assert noise == min(max(round(0.15 * length), 1), length - 1)
    assert spans == max(round(noise / mean), 1)
    rng = random.Random(length)
    for _ in range(100):
        mask = random_spans_noise_mask(length, cfg, rng)
        assert len(mask) == length and sum(mask) == noise
        segments = runs(mask)
        assert [key for key, _ in segments] == [False, True] * spans  # kept first, noise last
        assert all(n > 0 for _, n in segments)


def composition_part(items: int, parts: int, j: int) -> float:
    """P(a given part has j items) when ``items`` are split into ``parts`` non-empty parts,
    every split equally likely: C(items - j - 1, parts - 2) / C(items - 1, parts - 1)."""
    return comb(items - j - 1, parts - 2) / comb(items - 1, parts - 1)


@pytest.mark.parametrize(("mean", "spans"), [(2.0, 8), (3.0, 5), (5.0, 3), (10.0, 2)])
def test_span_lengths_are_a_uniform_random_composition(mean, spans):
    """n = 100: 15 noise tokens in round(15 / mean) spans (Python's round: 7.5 -> 8), 85 kept
    tokens in as many segments, each split equally likely."""
    cfg, rng, draws = SpanConfig(0.15, mean), random.Random(0), 2000
    noise_lengths, kept_lengths = Counter(), Counter()
    for _ in range(draws):
        for noise, n in runs(random_spans_noise_mask(100, cfg, rng)):
            (noise_lengths if noise else kept_lengths)[n] += 1
    total = spans * draws
    assert sum(noise_lengths.values()) == total
    assert sum(n * c for n, c in noise_lengths.items()) / total == pytest.approx(15 / spans)
    for j in range(1, 9):
        assert noise_lengths[j] / total == pytest.approx(composition_part(15, spans, j), abs=0.015)
    for j in (1, 10, 30, 50):
        assert kept_lengths[j] / total == pytest.approx(composition_part(85, spans, j), abs=0.01)


def test_t5_block_length_for_512_token_inputs():
    """random_spans_helper: 568 raw tokens -> 512 input tokens and 114 target tokens."""
    assert CFG.raw_length(512) == 568
    noise, spans = CFG.counts(568)
    assert (568 - noise + spans + 1, noise + spans + 1) == (512, 114)
    assert objective("span_corruption").block_length(512) == 568
    assert objective("replace_spans").block_length(512) == 511  # i.i.d.: the input's length


# --- i.i.d. corruption (§3.3.1-3.3.3, Tables 4-6): rates, spans, sentinels, rebuilding -----------

def rebuild(inputs: list[int], target: list[int], sentinel: dict[int, int]) -> list[int]:
    """The block from an input with sentinels and a target of sentinel + span."""
    spans, current = {}, None
    for t in target:
        current = sentinel[t] if t in sentinel else current
        spans.setdefault(current, []).extend([] if t in sentinel else [t])
    return [t for s in inputs for t in (spans[sentinel[s]] if s in sentinel else [s])]


@pytest.mark.parametrize("density", [0.10, 0.15, 0.25, 0.50])
def test_replace_spans_rate_spans_and_sentinels(density, tokenizer, net):
    n, samples = 60, 300
    chosen, rows = corrupted("replace_spans", tokenizer, net, n, samples, noise_density=density)
    vocabulary = chosen.collator(tokenizer, 0).vocabulary
    sentinel = {s: i for i, s in enumerate(vocabulary.sentinels)}
    eos, noise_tokens, span_lengths = tokenizer.special.sep, 0, []
    for block, inputs, target in rows:
        assert inputs[-1] == target[-1] == eos
        inputs, target = inputs[:-1], target[:-1]
        # sentinels in order, the same ones in input and target, the target's last one closing
        # the example iff its last token was kept
        used = [sentinel[t] for t in inputs if t in sentinel]
        written = [sentinel[t] for t in target if t in sentinel]
        assert used == list(range(len(used)))
        ends_kept = inputs[-1] not in sentinel
        assert written == used + [len(used)] * ends_kept
        assert rebuild(inputs, target, sentinel) == block
        spans = [len(list(g)) for key, g in groupby(target, key=lambda t: t in sentinel) if not key]
        noise_tokens += sum(spans)
        span_lengths += spans
    sd = sqrt(density * (1 - density) / (n * samples))
    assert abs(noise_tokens / (n * samples) - density) < 4 * sd  # the corruption rate
    # runs of i.i.d. noise are geometric: mean 1 / (1 - p), cut by the block's end
    assert sum(span_lengths) / len(span_lengths) == pytest.approx(1 / (1 - density), rel=0.08)


def test_bert_style_masks_90_percent_and_draws_ordinary_random_tokens(tokenizer, net):
    n, samples = 60, 400
    _, rows = corrupted("bert_style", tokenizer, net, n, samples)
    mask = tokenizer.backend.token_to_id("<extra_id_0>")  # T5 has no mask token: <extra_id_0>
    ordinary = set(range(tokenizer.vocab_size)) - {0, 1, 2} - {
        tokenizer.backend.token_to_id(f"<extra_id_{i}>") for i in range(100)}
    masked = replaced = 0
    for block, inputs, target in rows:
        assert target == [*block, tokenizer.special.sep]  # the whole original
        assert len(inputs) == len(target)
        for original, seen in zip(block, inputs[:-1], strict=True):
            masked += seen == mask
            if seen not in (original, mask):
                replaced += 1
                assert seen in ordinary
    total = n * samples
    for share, expected in ((masked / total, 0.15 * 0.9), (replaced / total, 0.15 * 0.1)):
        assert abs(share - expected) < 4 * sqrt(expected * (1 - expected) / total)


def test_mass_style_masks_every_corrupted_token(tokenizer, net):
    n, samples = 60, 300
    _, rows = corrupted("mass_style", tokenizer, net, n, samples)
    mask = tokenizer.backend.token_to_id("<extra_id_0>")
    masked = 0
    for block, inputs, target in rows:
        assert target == [*block, tokenizer.special.sep]
        assert all(seen in (original, mask) for original, seen in zip(block, inputs, strict=False))
        masked += inputs.count(mask)
    assert abs(masked / (n * samples) - 0.15) < 4 * sqrt(0.15 * 0.85 / (n * samples))


def test_drop_tokens_splits_the_block_into_input_and_target(tokenizer, net):
    n, samples = 60, 300
    chosen, rows = corrupted("drop_tokens", tokenizer, net, n, samples)
    dropped = 0
    for block, inputs, target in rows:
        inputs, target = inputs[:-1], target[:-1]
        assert sorted(inputs + target) == sorted(block)  # every token once, on one side
        order = {t: i for i, t in enumerate(block)}
        assert [order[t] for t in inputs] == sorted(order[t] for t in inputs)  # in order
        assert [order[t] for t in target] == sorted(order[t] for t in target)
        dropped += len(target)
    assert abs(dropped / (n * samples) - 0.15) < 4 * sqrt(0.15 * 0.85 / (n * samples))


def test_deshuffling_is_a_uniform_permutation(tokenizer, net):
    n, samples = 12, 2400
    _, rows = corrupted("deshuffling", tokenizer, net, n, samples)
    first = Counter()
    for block, inputs, target in rows:
        assert target == [*block, tokenizer.special.sep]
        assert sorted(inputs[:-1]) == sorted(block)
        first[block.index(inputs[0])] += 1  # where the first input token came from
    expected = samples / n
    assert set(first) == set(range(n))
    assert all(abs(c - expected) < 4 * sqrt(expected) for c in first.values())


def test_prefix_lm_splits_at_a_uniform_point(tokenizer, net):
    n, samples = 10, 2700
    _, rows = corrupted("prefix_lm", tokenizer, net, n, samples)
    splits = Counter()
    for block, inputs, target in rows:
        assert inputs[:-1] + target[:-1] == block  # prefix in, the rest out
        splits[len(inputs) - 1] += 1
    expected = samples / (n - 1)
    assert set(splits) == set(range(1, n))
    assert all(abs(c - expected) < 4 * sqrt(expected) for c in splits.values())


def test_prefix_lm_and_deshuffling_cut_each_document_alone(tokenizer):
    documents = [[[5, 6, 7]], [[8]], [[9, 10], [11, 12, 13]]]
    stream = T5Denoising("prefix_lm").make_examples(4, tokenizer)(documents, rng=None)
    assert [e["tokens"] for e in stream] == [[5, 6, 7], [9, 10, 11], [12, 13]]
    joined = objective("replace_spans").make_examples(4, tokenizer)(documents, rng=None)
    assert [e["tokens"] for e in joined] == [[5, 6, 7], [8, 9, 10], [11, 12, 13]]


# --- configuration ------------------------------------------------------------------------------

@pytest.mark.parametrize(("mode", "settings", "message"), [
    ("prefix_lm", {"noise_density": 0.15}, "corrupts by its prefix mask, without noise_density"),
    ("replace_spans", {}, "needs a noise_density"),
    ("replace_spans", {"noise_density": 0.15, "mean_noise_span_length": 3.0},
     "takes no mean_noise_span_length; it takes noise_density"),
    ("deshuffling", {"random_token_rate": 0.1}, "takes no random_token_rate; it takes no setting"),
    ("mass_style", {"noise_density": 1.5}, r"noise_density=1.5 must be in \(0, 1\)"),
    ("mlm_style", {}, "mode 'mlm_style' is unknown"),
])
def test_settings_a_mode_does_not_take_are_refused(mode, settings, message):
    with pytest.raises(PlmbenchError, match=message):
        T5Denoising(mode, **settings)


def test_sentinels_must_cover_the_worst_case(tokenizer):
    objective("replace_spans").make_examples(200, tokenizer)  # 199 tokens: at most 100 sentinels
    with pytest.raises(PlmbenchError, match=r"needs up to 101 sentinels .* has 100"):
        objective("replace_spans").make_examples(202, tokenizer)
    objective("mass_style").make_examples(512, tokenizer)  # no sentinels needed
    bart = train_tokenizer(get_arch("bart").tokenizer, TEXT, vocab_size=300, lowercase=False)
    with pytest.raises(PlmbenchError, match="needs up to 7 sentinels .* has 0"):
        objective("span_corruption").make_examples(128, bart)


def test_bart_pretrains_under_the_modes_without_sentinels():
    """BART's vocabulary has a <mask> and no sentinels: MASS-style masks with <mask> and starts
    the decoder with BART's </s>; the sentinel modes are refused before anything runs."""
    bart = train_tokenizer(get_arch("bart").tokenizer, TEXT, vocab_size=300, lowercase=False)
    special = bart.special
    net = BartForConditionalGeneration(BartConfig(
        vocab_size=bart.vocab_size, pad_token_id=special.pad, d_model=16, encoder_layers=1,
        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=24, decoder_ffn_dim=24, max_position_embeddings=64))
    chosen = objective("mass_style")
    chosen.check(Model(get_arch("bart"), net, bart))
    blocks = [{"tokens": list(range(10, 60)), "mask_seed": i} for i in range(4)]
    batch = chosen.collator(bart, 0)(blocks)
    inputs = batch["input_ids"][batch["input_ids"] != special.pad]
    assert (inputs == special.mask).any() and (batch["decoder_input_ids"][:, 0] == 2).all()
    assert torch.isfinite(chosen.losses(net, batch)["mass_style_loss"])
    with pytest.raises(PlmbenchError, match="needs up to 32 sentinels .* has 0"):
        objective("replace_spans").make_examples(64, bart)


# --- the loss and its FLOPs -----------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["span_corruption", "bert_style", "prefix_lm"])
def test_loss_matches_transformers_and_flops_match_torchs_counter(mode, tokenizer, net, tmp_path):
    transformers = require("transformers")
    chosen = objective(mode)
    chosen.check(Model(get_arch("t5"), net, tokenizer))
    documents = [[tokenizer.backend.encode(s, add_special_tokens=False).ids for s in TEXT[i:i + 2]]
                 for i in range(0, 8, 2)]
    examples = chosen.make_examples(40, tokenizer)(documents, rng=random.Random(0))
    batch = chosen.collator(tokenizer, 0)([{**e, "mask_seed": i}
                                           for i, e in enumerate(examples[:4])])
    assert batch["input_ids"].shape[1] <= 40
    reference = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        to_hf(Model(get_arch("t5"), net, tokenizer), tmp_path / "export")).eval()
    # attention through matmuls (SDPA's math backend), which the counter sees
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        ours = chosen.losses(net, batch)[f"{chosen.name}_loss"]
    with torch.no_grad():
        theirs = reference(input_ids=batch["input_ids"], attention_mask=token_mask(batch).long(),
                           labels=batch["labels"]).loss
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
    assert (batch["labels"] != IGNORE_INDEX).sum() > 0
    assert float(chosen.flops(EncoderShape.of(net.config), batch)) == 3 * counter.get_total_flops()


def test_every_mode_has_its_yaml():
    conf = Path(__file__).resolve().parents[2] / "conf" / "objective"
    modes = {OmegaConf.load(path).get("mode") for path in conf.glob("*.yaml")}
    assert set(MODES) <= modes
