"""SQuAD featurisation for any tokenizer family: windows overlap by the stride, every training
target decodes to the answer (or points at the start token when the window lacks it), and eval
offsets map tokens back to the context's characters."""

import pytest

from datamodules.errors import PlmbenchError
from datamodules.squad import SquadDataModule
from datamodules.tokenization import load_tokenizer, train_tokenizer
from lit_models.archs import get_arch

TASK = dict(
    name="squad/v1", dataset="squad", config="plain_text", splits={"train": "train",
                                                                   "eval": ["validation"]},
    id_field="id", context_field="context", question_field="question", answers_field="answers",
    max_length=96, doc_stride=32, max_query_length=16, batch_size=4, max_train_samples=40,
    max_eval_samples=40,
)


@pytest.fixture(scope="module")
def roberta_tokenizer(tmp_path_factory):
    import pyarrow.parquet as pq

    from tests.conftest import MIRROR_CANDIDATES

    root = next(p for p in MIRROR_CANDIDATES if (p / "squad").is_dir())
    contexts = pq.read_table(root / "squad/plain_text/train.parquet").column("context")
    return train_tokenizer(get_arch("roberta").tokenizer, contexts.to_pylist()[:300], 800, False)


@pytest.fixture(params=["wordpiece", "bpe"])
def tokenizer(request, minilm_path, roberta_tokenizer):
    return load_tokenizer(minilm_path) if request.param == "wordpiece" else roberta_tokenizer


def test_windows_targets_and_offsets(mirror, tokenizer):
    dm = SquadDataModule(TASK, tokenizer)
    dm.setup()
    raw = dm.eval_examples[0]
    # long contexts are split: more windows than questions, each at most max_length tokens
    assert len(dm.train_data) > TASK["max_train_samples"]
    assert max(len(ids) for ids in dm.train_data["input_ids"]) == TASK["max_length"]
    answered = 0
    for window in dm.train_data:
        ids, start, end = window["input_ids"], window["start_positions"], window["end_positions"]
        assert ids[window["cls_index"]] == tokenizer.special.cls
        if start == window["cls_index"]:
            assert end == start
            continue
        answered += 1
        assert window["question_mask"][start] == 0 and start <= end
        text = tokenizer.backend.decode(ids[start:end + 1]).strip()
        assert text  # a real span of the context
        # segments as the tokenizer lays out a pair: BERT's [CLS] q [SEP] 0s, c [SEP] 1s
        whole = tokenizer.backend.encode("q", "c")
        types = window["token_type_ids"]
        assert (types[0], types[start], types[-1]) == (whole.type_ids[0], whole.type_ids[-2],
                                                      whole.type_ids[-1])
    assert answered >= TASK["max_train_samples"] * 0.8
    # eval windows: the gold answer's characters are covered by context tokens of some window
    windows = dm.eval_windows[0]
    for index in range(10):
        row = raw[index]
        first = row["answers"]["answer_start"][0]
        mine = [w for w in windows if w["example_index"] == index]
        starts = {s for w in mine for s in w["offset_start"] if s >= 0}
        assert any(s <= first < s + 20 for s in starts)
        # consecutive windows share doc_stride context tokens
        if len(mine) > 1:
            a = [s for s in mine[0]["offset_start"] if s >= 0]
            b = [s for s in mine[1]["offset_start"] if s >= 0]
            assert a[-TASK["doc_stride"]:] == b[:TASK["doc_stride"]]


def test_roberta_pairs_use_its_roles_and_one_segment(mirror, roberta_tokenizer):
    dm = SquadDataModule(TASK, roberta_tokenizer)
    dm.setup()
    assert {t for types in dm.train_data["token_type_ids"] for t in types} == {0}
    window = dm.eval_data[0][0]
    special = roberta_tokenizer.special
    ids = window["input_ids"]
    assert ids[0] == special.cls and ids[-1] == special.sep
    # Longformer's global attention: the classifier token and the question, up to the separators
    assert window["question_mask"].index(1) == 0
    question_end = sum(window["question_mask"])
    assert ids[question_end:question_end + 2] == [special.sep, special.sep]
    assert not any(window["question_mask"][question_end:])
    assert set(window["token_type_ids"]) == {0}


def test_stride_must_leave_room_for_context(minilm_path):
    with pytest.raises(PlmbenchError, match="doc_stride"):
        SquadDataModule({**TASK, "doc_stride": 80}, load_tokenizer(minilm_path))


def test_no_stride_keeps_one_window_per_question(mirror, minilm_path):
    dm = SquadDataModule({**TASK, "doc_stride": None}, load_tokenizer(minilm_path))
    dm.setup()
    assert len(dm.eval_windows[0]) == len(dm.eval_examples[0]) == TASK["max_eval_samples"]
    assert len(dm.train_data) == TASK["max_train_samples"]
    assert max(len(ids) for ids in dm.eval_data[0]["input_ids"]) == TASK["max_length"]
