"""Every architecture's exports as transformers' own recipes use them: the tokenizer, loaded with
``AutoTokenizer`` and called the standard way, gives plmbench's inputs (ids, token types where
the model reads them, attention mask) for single sentences and pairs; every exported class loads
with no missing, unexpected or mismatched weight; and the token-classification recipe
(``is_split_into_words=True``, ``add_prefix_space=True`` for byte-level BPE) labels the same
sub-tokens as plmbench's tagging data, tag for tag."""

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from bench.compose import compose_config
from datamodules.init_from import InitFrom
from datamodules.tagging import encode_words
from lit_models.archs import get_arch
from lit_models.core.build import build_net
from lit_models.interop.hf import to_hf
from tests.conftest import require

transformers = require("transformers")

PRESETS = [
    "bert-tiny-scratch",
    "roberta-tiny-scratch",
    "albert-tiny-scratch",
    "distilbert-tiny-scratch",
    "electra-tiny-scratch",
    "spanbert-tiny-scratch",
    "deberta-tiny-scratch",
    "xlnet-tiny-scratch",
    "longformer-tiny-scratch",
    "gpt2-tiny-scratch",
    "t5-tiny-scratch",
    "bart-tiny-scratch",
]
TAGS = ["O", "B-Disease", "I-Disease"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """RTE sentences (the vocabularies' text and the pairs) and NCBI-disease sentences."""
    from tests.conftest import MIRROR_CANDIDATES

    root = next((p for p in MIRROR_CANDIDATES if (p / "glue").is_dir()), None)
    if root is None:
        pytest.skip("no data mirror")
    rows = pq.read_table(root / "glue/rte/train.parquet").to_pylist()[:300]
    ncbi = pq.read_table(root / "ncbi_disease/ncbi_disease/validation.parquet").to_pylist()[:120]
    texts = [r["sentence1"] for r in rows] + [r["sentence2"] for r in rows]
    # the vocabulary also sees the tagging text, as a tagging run's own vocabulary would
    texts += [" ".join(r["tokens"]) for r in ncbi]
    return texts, [(r["sentence1"], r["sentence2"]) for r in rows[:40]], ncbi


@pytest.fixture(scope="module", params=PRESETS)
def exported(request, corpus, tmp_path_factory):
    """(preset, arch, encoder, tokenizer, {kind: export directory}) of a scratch net of the
    preset."""
    texts = corpus[0]
    cfg = compose_config([f"model={request.param}", "model.vocab_size=1000"], "")
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    key = ("exports-corpus", texts)
    arch = get_arch(model_cfg["arch"])
    scratch = InitFrom.parse("scratch")
    model = build_net(arch, model_cfg, scratch, False, lambda: key)
    encoder, tokenizer = model.net, model.tokenizer
    pretraining = build_net(arch, model_cfg, scratch, True, lambda: key)
    out = tmp_path_factory.mktemp(request.param)
    hidden = encoder.config.hidden_size
    exports = {"encoder": to_hf(model, out / "encoder"),
               "pretraining": to_hf(pretraining, out / "pretraining")}
    if arch.classification_head is not None:
        exports["classifier"] = to_hf(model, out / "classifier",
                                      arch.classification_head(encoder.config, 3, 0.1),
                                      ["a", "b", "c"])
    if arch.kind == "encoder":
        exports["qa"] = to_hf(model, out / "qa",
                              nn.ModuleDict({"qa_outputs": nn.Linear(hidden, 2)}), task="qa")
        exports["tagger"] = to_hf(model, out / "tagger",
                                  nn.ModuleDict({"classifier": nn.Linear(hidden, len(TAGS))}),
                                  TAGS, task="tagger")
    return request.param, arch, encoder, tokenizer, exports


def test_every_exported_class_loads_with_exactly_its_weights(exported):
    preset, _, _, _, exports = exported
    for kind, directory in exports.items():
        (name,) = json.loads((directory / "config.json").read_text())["architectures"]
        _, info = getattr(transformers, name).from_pretrained(directory, output_loading_info=True)
        problems = {k: v for k, v in info.items() if v and k != "error_msgs"}
        assert not problems, (preset, kind, name, problems)


def test_the_exported_tokenizer_gives_plmbenchs_inputs(exported, corpus):
    preset, arch, encoder, tokenizer, exports = exported
    _, pairs, _ = corpus
    theirs = transformers.AutoTokenizer.from_pretrained(exports["encoder"])
    assert list(theirs.model_input_names) == list(arch.tokenizer.model_input_names), preset
    config = json.loads((exports["encoder"] / "tokenizer_config.json").read_text())
    assert config["model_input_names"] == list(arch.tokenizer.model_input_names)
    # the special tokens by role, as transformers reads them
    for role, token_id in vars(tokenizer.special).items():
        if token_id is not None and f"{role}_token" in config:
            assert theirs.convert_tokens_to_ids(getattr(theirs, f"{role}_token")) == token_id
    singles = [a for a, _ in pairs] + [b for _, b in pairs]
    inputs = [((text,), tokenizer.backend.encode(text)) for text in singles]
    if arch.kind == "encoder":  # pairs are an encoder's input (T5/BART/GPT-2 read GLUE as text)
        inputs += [(pair, tokenizer.backend.encode(*pair)) for pair in pairs]
    for args, ours in inputs:
        got = theirs(*args)
        assert got["input_ids"] == ours.ids, (preset, args)
        assert got["attention_mask"] == [1] * len(ours.ids)
        if "token_type_ids" in arch.tokenizer.model_input_names:
            assert got["token_type_ids"] == ours.type_ids, (preset, args)
        else:  # the model reads no segments: plmbench's types, if any, are all ignored
            assert "token_type_ids" not in got


def test_the_token_classification_recipe_labels_what_plmbench_labels(exported, corpus):
    preset, arch, encoder, tokenizer, exports = exported
    if "tagger" not in exports:
        pytest.skip(f"{preset} is no encoder: no tagging")
    _, _, ncbi = corpus
    byte_level = tokenizer.family == "bpe"
    recipe = transformers.AutoTokenizer.from_pretrained(
        exports["tagger"], **({"add_prefix_space": True} if byte_level else {}))
    sentences = [r["tokens"] for r in ncbi]
    ours = encode_words(tokenizer.words_encoder(128), sentences)
    equal = total = 0
    for row, words, tags in zip(ours, sentences, (r["ner_tags"] for r in ncbi), strict=True):
        got = recipe(words, is_split_into_words=True, truncation=True, max_length=128)
        assert got["input_ids"] == row["input_ids"], preset
        # the recipe's labels: the word's tag on its first sub-token, -100 elsewhere
        word_ids, previous, expected = got.word_ids(), None, []
        for word in word_ids:
            expected.append(tags[word] if word is not None and word != previous else -100)
            previous = word
        labelled = np.asarray([*tags, -100])[row["word_ids"]].tolist()
        equal += sum(a == b for a, b in zip(labelled, expected, strict=True))
        total += len(expected)
    assert equal == total, f"{preset}: {equal} of {total} token labels equal"


def test_a_tagger_export_scores_as_transformers(exported, corpus):
    """The exported tagger, read by transformers from the recipe's inputs, gives our logits."""
    preset, arch, encoder, tokenizer, exports = exported
    if "tagger" not in exports:
        pytest.skip(f"{preset} is no encoder: no tagging")
    words = corpus[2][0]["tokens"]
    byte_level = tokenizer.family == "bpe"
    recipe = transformers.AutoTokenizer.from_pretrained(
        exports["tagger"], **({"add_prefix_space": True} if byte_level else {}))
    model = transformers.AutoModelForTokenClassification.from_pretrained(exports["tagger"]).eval()
    inputs = recipe(words, is_split_into_words=True, return_tensors="pt")
    (row,) = encode_words(tokenizer.words_encoder(512), [words])
    assert inputs["input_ids"][0].tolist() == row["input_ids"]
    with torch.no_grad():
        hidden = encoder.eval()(**{k: v for k, v in inputs.items()
                                   if k in ("input_ids", "token_type_ids", "attention_mask")})
        theirs = model(**inputs).logits
    head = model.classifier
    torch.testing.assert_close(head(hidden.last_hidden_state), theirs, atol=1e-4, rtol=1e-4)


def test_a_classifier_export_scores_transformers_batches_as_plmbench_scores_examples(
        exported, corpus):
    """transformers' sequence-classification recipe: a padded batch of pairs (single sentences
    for decoders) from the exported tokenizer into the exported classifier gives, row by row,
    the logits plmbench's classifier gives each example as its GLUE data encodes it."""
    preset, arch, encoder, tokenizer, exports = exported
    if "classifier" not in exports:
        pytest.skip(f"{preset} has no classification head here")
    from datamodules.collate import pad_collate
    from lit_models.families.classify import LitClassifier
    from lit_models.interop.hf import from_hf, load_head

    _, net, _ = from_hf(exports["classifier"])
    head = arch.classification_head(net.config, 3, 0.0)
    assert load_head(head, exports["classifier"], arch.hf.classifier_names)
    ours = LitClassifier(net, arch.capabilities, head, 3, [], [], {}).eval()
    pairs = corpus[1][:8]
    inputs = pairs if arch.kind == "encoder" else [a for a, _ in pairs]
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        exports["classifier"]).eval()
    recipe = transformers.AutoTokenizer.from_pretrained(exports["classifier"])
    if arch.kind == "encoder":
        batch = recipe([a for a, _ in pairs], [b for _, b in pairs], padding=True,
                       return_tensors="pt")
    else:
        batch = recipe(inputs, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(**batch).logits
        for i, item in enumerate(inputs):
            encoding = tokenizer.backend.encode(*item) if isinstance(item, tuple) else \
                tokenizer.backend.encode(item)
            example = pad_collate([{"input_ids": encoding.ids,
                                    "token_type_ids": encoding.type_ids}],
                                  pad_id=tokenizer.special.pad)
            torch.testing.assert_close(ours(example)[0], theirs[i], atol=1e-4, rtol=1e-4,
                                       msg=f"{preset} row {i}")
