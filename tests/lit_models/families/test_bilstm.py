"""The BiLSTM baselines' pieces: padding changes no sentence's or pair's scores (the masked max
pooling, packed LSTMs and masked attention), the attention is a softmax over the other sentence's
words, word-level batches line up every input with the words, and a frozen encoder's input reads
each word at its first sub-word; GLUE word examples keep their rows and predict test splits
whole."""

import torch

from datamodules.word_inputs import (
    SentenceCollate,
    TagCollate,
    WordClassificationDataModule,
    WordInputs,
)
from datamodules.words import WordVocabulary, split_words
from lit_models.core.features import hidden_states
from lit_models.families.bilstm_inputs import EncoderInput
from lit_models.nets.bert import BertConfig, BertModel
from lit_models.nets.bilstm import BiLSTMClassifier, BiLSTMConfig, attend
from tests.datamodules.test_glue import glue_task, raw_rows


def classifier(**changes) -> BiLSTMClassifier:
    torch.manual_seed(0)
    config = BiLSTMConfig(**{"input_dim": 6, "hidden_size": 5, "num_layers": 2,
                             "classifier_hidden": 4, "num_labels": 3, **changes})
    return BiLSTMClassifier(config).eval()


def padded(x: torch.Tensor, extra: int) -> tuple[torch.Tensor, torch.Tensor]:
    mask = torch.ones(1, x.shape[1], dtype=torch.bool)
    noise = torch.randn(1, extra, x.shape[2]) * 100
    return torch.cat([x, noise], 1), torch.cat([mask, torch.zeros(1, extra, dtype=torch.bool)], 1)


def test_padding_changes_no_sentence_or_pairs_scores():
    x, y = torch.randn(1, 4, 6), torch.randn(1, 3, 6)
    full = torch.ones(1, 4, dtype=torch.bool)
    single = classifier()
    with torch.no_grad():
        assert torch.allclose(single(x, full), single(*padded(x, 3)), atol=1e-6)
        for attention in (False, True):
            pair = classifier(pairs=True, attention=attention)
            alone = pair(x, full, y, torch.ones(1, 3, dtype=torch.bool))
            xp, xm = padded(x, 2)
            yp, ym = padded(y, 5)
            assert torch.allclose(alone, pair(xp, xm, yp, ym), atol=1e-6), attention


def test_attention_is_a_softmax_over_the_other_sentences_words():
    query, keys = torch.randn(1, 2, 3), torch.randn(1, 4, 3)
    mask = torch.tensor([[True, True, True, False]])
    weights = torch.softmax(query[0] @ keys[0, :3].T, dim=-1)
    assert torch.allclose(attend(query, keys, mask)[0], weights @ keys[0, :3], atol=1e-6)


def test_word_batches_line_up_every_input_with_the_words():
    vocab = WordVocabulary.count([["the", "cat", "sat"]], None, 1, lowercase=True)
    inputs = WordInputs(vocab, chars=True, max_words=3)
    batch = SentenceCollate(inputs)([
        {"words": ["The", "cat", "sat", "down"], "words_b": ["A"], "labels": 1},
        {"words": ["cat"], "words_b": ["the", "cat"], "labels": 0}])
    assert batch["vocab_ids"].tolist() == [[vocab.index["the"], vocab.index["cat"],
                                            vocab.index["sat"]], [vocab.index["cat"], 0, 0]]
    assert batch["word_mask"].tolist() == [[True] * 3, [True, False, False]]
    assert batch["char_ids"].shape == (2, 5, 50)  # <S> and </S> around the words
    assert batch["vocab_ids_b"].tolist() == [[vocab.unk, 0], [vocab.index["the"],
                                                           vocab.index["cat"]]]
    assert batch["attention_mask"].sum() == 4 + 3  # the words of both sides, counted
    tags = TagCollate(inputs)([{"words": ["the", "cat"], "labels": [0, 2]}])
    assert tags["labels"].tolist() == [[0, 2]] and tags["word_ids"].tolist() == [[0, 1]]


def test_a_frozen_encoder_reads_each_word_at_its_first_sub_word(tmp_path):
    from datamodules.tokenization import BERT, train_tokenizer

    tokenizer = train_tokenizer(BERT, ["unbelievable things happen", "the cat sat"] * 20, 60,
                                lowercase=True)
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=8,
                                   num_hidden_layers=2, num_attention_heads=2,
                                   intermediate_size=16))
    inputs = WordInputs(subwords=tokenizer, subword_length=64)
    words = ["unbelievable", "cat", "sat"]
    batch = inputs.side([words], "")
    layer = EncoderInput(encoder, tokenizer.special.pad, [-1], "last")
    out = layer(batch, "")
    encoding = tokenizer.backend.encode(" ".join(words))
    first = [encoding.word_ids.index(i) for i in range(3)]
    assert batch["first_subword"][0].tolist() == first
    with torch.no_grad():
        states = hidden_states(encoder.eval(), {"input_ids": torch.tensor([encoding.ids])})[-1]
    assert torch.allclose(out[0], states[0, first], atol=1e-6)


def test_glue_word_batches_keep_row_indices_and_predict_whole_test_splits(mirror):
    """Every example keeps its row in the split (GLUE's predictions files' key) and
    ``task.predict_splits`` are read whole, unlabelled, in order."""
    task = glue_task("rte", predict_splits=["test"])
    vocab = WordVocabulary.count([["the", "cat"]], None, 1, True)
    dm = WordClassificationDataModule(task, WordInputs(vocab=vocab))
    dm.setup("fit")
    [test] = dm.predict_data
    rows = raw_rows("rte", "test", 3000)
    assert len(test) == len(rows) == 3000 and {e["labels"] for e in test} == {-1}
    assert [e["index"] for e in test] == list(range(len(test)))
    assert test[7]["words"] == split_words([rows[7]["sentence1"]], lowercase=False)[0]
    batch = SentenceCollate(dm.inputs)(dm.eval_data[0][:5])
    assert batch["index"].tolist() == [0, 1, 2, 3, 4]
