"""PretrainDataModule on the real mirror (BERT §3.1 / Appendix A.2 pretraining data; RoBERTa §4.1
static vs dynamic masking, §4.2 FULL-SENTENCES): documents, batches, masks, caching.

WikiText-2 has no train split in the mirror, so its validation split plays the train split.
The Wikipedia sample (36k articles, 56 MB) is always capped to a few documents.
"""

import os

import pyarrow.parquet as pq
import pytest
import torch

from datamodules.collate import token_mask
from datamodules.errors import PlmbenchError
from datamodules.pretrain import split_documents, vocabulary_corpus
from datamodules.sources import mirror_path
from datamodules.tokenization import VOCAB_TXT, load_tokenizer, train_tokenizer
from lit_models.families.pretrain import pretraining_datamodule
from lit_models.objectives.mlm import IGNORE_INDEX, MaskedLM, MaskingConfig


def corpus_datamodule(task, tokenizer, masking: MaskingConfig, nsp: bool, seed: int = 0):
    """The corpus DataModule as ``objective=mlm`` (or ``mlm_nsp``) feeds it."""
    return pretraining_datamodule(task, tokenizer, MaskedLM(nsp=nsp, **vars(masking)), seed=seed)

WIKITEXT = dict(
    name="wikitext-2", dataset="wikitext", config="wikitext-2-v1", hub_id="Salesforce/wikitext",
    text_field="text", splits={"train": "validation", "eval": ["test"]},
    document_format="wikitext", max_length=128, max_train_samples=8, max_eval_samples=3,
    batch_size=8, eval_batch_size=16,
)
WIKIPEDIA = dict(
    name="wikipedia-sample", dataset="wikipedia_en_sample", config="enwiki_pages_56.5M-57.0M",
    text_field="text", splits={"train": "train"}, document_format="article", max_length=64,
    max_train_samples=30, batch_size=8,
)


@pytest.fixture
def tokenizer(minilm_path):
    return load_tokenizer(minilm_path)


def wikitext_lines(split: str) -> list[str]:
    return pq.read_table(mirror_path("wikitext", "wikitext-2-v1", split)).column("text").to_pylist()


def epoch_rows(loader) -> list[tuple]:
    """Every (input ids, labels) row of one pass, unpadded, in the order seen."""
    rows = []
    for batch in loader:
        for ids, labels, mask in zip(
            batch["input_ids"], batch["labels"], token_mask(batch).long(), strict=True
        ):
            rows.append((tuple(ids[mask == 1].tolist()), tuple(labels[mask == 1].tolist())))
    return rows


def test_wikitext_documents_are_articles_split_into_sentences(mirror, tokenizer) -> None:
    dm = corpus_datamodule({**WIKITEXT, "max_train_samples": None}, tokenizer, MaskingConfig(),
                            nsp=True)
    documents = dm.documents("validation")
    lines = wikitext_lines("validation")
    titles = [line for line in lines if line.startswith(" = ") and not line.startswith(" = = ")]
    assert len(documents) == len(titles) == 60
    # the first sentence of the first article, as the tokenizer encodes it on its own
    first_paragraph = next(line for line in lines[2:] if line.strip())
    first_sentence = first_paragraph.split(" . ")[0] + " ."
    assert first_sentence.startswith(" Homarus gammarus , known as the European lobster")
    expected = tokenizer.backend.encode(first_sentence.strip(), add_special_tokens=False).ids
    assert documents[0][0] == expected
    capped = corpus_datamodule(WIKITEXT, tokenizer, MaskingConfig(), nsp=True)
    assert capped.documents("validation") == documents[:8]


def test_wikitext_nsp_batches(mirror, tokenizer) -> None:
    torch.manual_seed(0)
    dm = corpus_datamodule(WIKITEXT, tokenizer, MaskingConfig(), nsp=True, seed=0)
    dm.setup("fit")
    assert dm.eval_split_names == ["test"] and len(dm.val_dataloader()) == 1
    batches = list(dm.train_dataloader())
    assert sum(len(b["input_ids"]) for b in batches) == dm.num_train_examples > 200
    special = torch.tensor(sorted({0, 100, 101, 102, 103}))  # MiniLM [PAD] [UNK] [CLS] [SEP] [MASK]
    selected = candidates = 0
    labels_seen = []
    for batch in batches:
        assert set(batch) - {"attention_mask"} == {"input_ids", "token_type_ids", "labels",
                                                   "next_sentence_label", "label_positions"}
        ids, labels, mask = batch["input_ids"], batch["labels"], token_mask(batch).long()
        assert ids.shape == labels.shape == batch["token_type_ids"].shape and ids.shape[1] <= 128
        assert (ids[:, 0] == 101).all() and ((ids == 102).sum(1) == 2).all()
        # segment B starts right after the first [SEP] and ends at the last real token
        after_first_sep = ((ids == 102).cumsum(1) - (ids == 102).long()) >= 1
        assert torch.equal(batch["token_type_ids"].bool(), after_first_sep & (mask == 1))
        original = torch.where(labels != IGNORE_INDEX, labels, ids)
        is_special = torch.isin(original, special)
        assert (labels[is_special] == IGNORE_INDEX).all()  # pad and specials never predicted
        selected += int((labels != IGNORE_INDEX).sum())
        candidates += int((~is_special).sum())
        labels_seen += batch["next_sentence_label"].tolist()
    assert abs(selected / candidates - 0.15) < 0.01
    assert abs(labels_seen.count(0) / len(labels_seen) - 0.5) < 0.1
    # eval masks are fixed; training masks are drawn anew (dynamic masking)
    val = dm.val_dataloader()[0]
    assert epoch_rows(val) == epoch_rows(val)
    examples = dm.train_data[:8]
    assert not torch.equal(dm.collate_fn(examples)["labels"], dm.collate_fn(examples)["labels"])


def test_static_masking_repeats_each_copy_across_epochs(mirror, tokenizer) -> None:
    torch.manual_seed(0)
    task = {**WIKITEXT, "max_train_samples": 4}
    static = corpus_datamodule(task, tokenizer, MaskingConfig(static=True, dupe_factor=3), True)
    dynamic = corpus_datamodule(task, tokenizer, MaskingConfig(), True)
    static.setup("fit")
    dynamic.setup("fit")
    # three copies, each paired anew (so not exactly 3x), each with its own mask seed
    assert 2.7 < static.num_train_examples / dynamic.num_train_examples < 3.3
    seeds = [example["mask_seed"] for example in static.train_data]
    assert len(set(seeds)) == len(seeds)
    loader = static.train_dataloader()
    first = epoch_rows(loader)
    loader.sampler.set_epoch(1)  # as Lightning does at every epoch start
    second = epoch_rows(loader)
    assert first != second and sorted(first) == sorted(second)  # reshuffled, same masks
    loader = dynamic.train_dataloader()
    assert sorted(epoch_rows(loader)) != sorted(epoch_rows(loader))


def test_static_masking_masks_each_sequence_dupe_factor_times_before_training(mirror,
                                                                              tokenizer) -> None:
    """BERT's create_pretraining_data (Devlin et al. 2019, A.2; RoBERTa §4.1's "static"): every
    training sequence is there dupe_factor times, each copy with a mask of its own, 15% of its
    tokens, fixed before training: the same in every epoch and in any batch. Without NSP, the
    copies are the same text, so the statistics are read per sequence."""
    task = {**WIKIPEDIA, "max_train_samples": 6, "packing": {"enabled": False}}
    dupe = 4
    static = corpus_datamodule(task, tokenizer, MaskingConfig(static=True, dupe_factor=dupe),
                               nsp=False)
    static.setup("fit")
    by_text: dict[tuple, list[dict]] = {}
    for example in static.train_data:
        by_text.setdefault(tuple(example["input_ids"]), []).append(example)
    assert {len(copies) for copies in by_text.values()} == {dupe}  # dupe_factor copies each

    def labels(example: dict) -> tuple:
        return tuple(static.collate_fn([example])["labels"][0].tolist())

    special = torch.tensor(sorted({0, 100, 101, 102, 103}))
    distinct = []
    for text, copies in by_text.items():
        masks = [labels(copy) for copy in copies]
        distinct.append(len(set(masks)))
        n = int((~torch.isin(torch.tensor(text), special)).sum())
        assert {sum(label != IGNORE_INDEX for label in mask) for mask in masks} == {
            max(1, round(0.15 * n))}  # create_pretraining_data's budget per sequence
        # fixed before training: collated again, alone or beside other examples, the same mask
        again = static.collate_fn([copies[0], copies[1]])["labels"][0][:len(text)].tolist()
        assert tuple(again) == masks[0] == labels(copies[0])
    assert sum(distinct) / len(distinct) > dupe - 0.5  # the copies' masks differ
    # over two epochs every (text, mask) pair repeats exactly; dynamic masking draws new ones
    loader = static.train_dataloader()
    first = sorted(epoch_rows(loader))
    loader.sampler.set_epoch(1)
    assert sorted(epoch_rows(loader)) == first
    dynamic = corpus_datamodule(task, tokenizer, MaskingConfig(), nsp=False)
    dynamic.setup("fit")
    assert dynamic.num_train_examples * dupe == static.num_train_examples
    loader = dynamic.train_dataloader()
    assert sorted(epoch_rows(loader)) != sorted(epoch_rows(loader))


def test_a_length_schedule_trains_each_length_for_its_share_of_the_steps(mirror,
                                                                        tokenizer) -> None:
    """task.length_schedule (BERT A.2: 90% of the steps at 128 tokens, then 512): the first
    share of max_steps batches holds rows of the first length, the rest of the second."""
    from types import SimpleNamespace

    task = {**WIKIPEDIA, "max_train_samples": 12, "length_schedule": [[0.75, 32], [0.25, 128]]}
    dm = corpus_datamodule(task, tokenizer, MaskingConfig(), nsp=False)
    dm.trainer = SimpleNamespace(max_steps=8, world_size=1, global_rank=0, fit_loop=None,
                                 accumulate_grad_batches=1)
    dm.setup("fit")
    widths = [batch["input_ids"].shape[1] for batch in dm.train_dataloader()]
    assert len(widths) == 8
    assert max(widths[:6]) <= 32 < max(widths[6:]) <= 128
    dm.trainer.max_steps = -1
    with pytest.raises(PlmbenchError, match="set trainer.max_steps"):
        dm.train_dataloader()


def test_wikipedia_articles_whole_word_full_sentences(mirror, tokenizer) -> None:
    torch.manual_seed(0)
    dm = corpus_datamodule(WIKIPEDIA, tokenizer, MaskingConfig(whole_word=True), nsp=False)
    dm.setup("fit")
    assert len(dm.tokenized["train"]) == 30 and len(dm.documents("train")) == 30
    assert dm.val_dataloader() == []
    continuation = ~tokenizer.word_start_mask()
    assert continuation[tokenizer.backend.token_to_id("##s")]
    assert not continuation[tokenizer.backend.token_to_id("s")]
    pieces_selected = 0
    for batch in dm.train_dataloader():
        assert set(batch) - {"attention_mask"} == {"input_ids", "token_type_ids", "labels",
                                                   "label_positions"}
        assert batch["input_ids"].shape[1] <= 64 and not batch["token_type_ids"].any()
        labels = batch["labels"]
        original = torch.where(labels != IGNORE_INDEX, labels, batch["input_ids"])
        selected = labels != IGNORE_INDEX
        # every "##" piece shares the fate of the token before it: whole words are masked
        piece = continuation[original[:, 1:]]
        assert torch.equal(selected[:, 1:][piece], selected[:, :-1][piece])
        pieces_selected += int(selected[:, 1:][piece].sum())
    assert pieces_selected > 0


def test_single_split_corpus_holds_out_its_last_documents(mirror, tokenizer) -> None:
    """task.eval_documents: the last N documents become the "heldout" eval split, disjoint from
    the training examples (a single-split corpus still gets a validation MLM loss)."""
    task = {**WIKIPEDIA, "max_train_samples": 12, "eval_documents": 3,
            "splits": {"train": "train", "eval": ["heldout"]}}
    dm = corpus_datamodule(task, tokenizer, MaskingConfig(), nsp=False)
    assert dm.eval_split_names == ["heldout"]
    dm.setup("fit")
    documents = dm.documents("train")
    assert len(documents) == 12

    special = {tokenizer.special.cls, tokenizer.special.sep}  # documents are [SEP]-separated

    def tokens(examples) -> set[int]:
        return {t for ex in examples for t in ex["input_ids"]} - special

    held_out = {t for doc in documents[-3:] for sentence in doc for t in sentence}
    train = {t for doc in documents[:-3] for sentence in doc for t in sentence}
    assert tokens(dm.eval_data[0]) <= held_out
    assert tokens(dm.train_data) <= train
    # the held-out articles contribute words the training articles lack, and none of them leak
    assert tokens(dm.eval_data[0]) - train and not (tokens(dm.train_data) - train)
    assert len(dm.val_dataloader()) == 1


def test_tokenized_sentences_are_cached_by_fingerprint(mirror, tokenizer) -> None:
    first = corpus_datamodule(WIKITEXT, tokenizer, MaskingConfig(), nsp=True)
    first.setup("fit")
    cache = first.tokenized["validation"].cache_files
    assert len(cache) == 1 and cache[0]["filename"].endswith(".arrow")
    written = os.stat(cache[0]["filename"]).st_mtime_ns
    again = corpus_datamodule(WIKITEXT, tokenizer, MaskingConfig(static=True), nsp=False)
    again.setup("fit")
    assert again.tokenized["validation"].cache_files == cache  # read back, not re-tokenized
    assert os.stat(cache[0]["filename"]).st_mtime_ns == written
    other_cap = corpus_datamodule({**WIKITEXT, "max_train_samples": 5}, tokenizer,
                                   MaskingConfig(), nsp=True)
    other_cap.setup("fit")
    assert other_cap.tokenized["validation"].cache_files != cache


def test_vocabulary_corpus_trains_a_scratch_vocabulary(mirror) -> None:
    task = {**WIKITEXT, "splits": {"train": "validation", "eval": []}}
    key, texts = vocabulary_corpus(task)
    texts = list(texts)
    assert texts[0].startswith("Homarus gammarus , known as the European lobster")
    assert all(isinstance(t, str) and t and not t.startswith(" = ") for t in texts)
    # the capped documents only (max_train_samples=8), and the key says which
    assert len(texts) == sum(len(d) for d in corpus_datamodule(
        WIKITEXT, load_tokenizer_of(texts), MaskingConfig(), nsp=False).documents("validation"))
    assert vocabulary_corpus({**task, "max_train_samples": 5})[0] != key
    scratch = train_tokenizer(VOCAB_TXT, texts, vocab_size=2000, lowercase=True)
    assert (~scratch.word_start_mask()).any()
    dm = corpus_datamodule(WIKITEXT, scratch, MaskingConfig(whole_word=True), nsp=True)
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert int(batch["input_ids"].max()) < scratch.vocab_size


def load_tokenizer_of(texts: list[str]):
    return train_tokenizer(VOCAB_TXT, texts, vocab_size=500, lowercase=True)


def test_too_few_documents_for_the_held_out_split_is_one_line(mirror, tokenizer) -> None:
    task = {**WIKIPEDIA, "max_train_samples": 4, "eval_documents": 4,
            "splits": {"train": "train", "eval": ["heldout"]}}
    dm = corpus_datamodule(task, tokenizer, MaskingConfig(), nsp=False)
    with pytest.raises(PlmbenchError, match="eval_documents=4; raise task.max_train_samples"):
        dm.setup("fit")
    with pytest.raises(PlmbenchError, match="set task.eval_documents"):
        corpus_datamodule({**task, "eval_documents": 0}, tokenizer, MaskingConfig(), nsp=False)


def test_bad_tasks_raise_one_line_errors(mirror, tokenizer) -> None:
    with pytest.raises(PlmbenchError, match="document_format"):
        corpus_datamodule({**WIKITEXT, "document_format": "xml"}, tokenizer, MaskingConfig(), True)
    no_train = {**WIKITEXT, "splits": {"train": "train", "eval": []}}  # not in the mirror
    dm = corpus_datamodule(no_train, tokenizer, MaskingConfig(), nsp=True)
    with pytest.raises(PlmbenchError, match="wikitext/wikitext-2-v1 split train not found"):
        dm.setup("fit")


def test_a_task_text_of_word_lists_is_read_as_words_joined_by_spaces(mirror, tokenizer) -> None:
    """TAPT on a tagging task: each sentence's tokens, joined, is a one-sentence document."""
    task = {"name": "pretrain/tapt/ncbi_disease", "dataset": "ncbi_disease",
            "config": "ncbi_disease", "text_field": "tokens", "document_format": "article",
            "splits": {"train": "train", "eval": ["validation"]}, "max_length": 64,
            "batch_size": 8, "max_train_samples": 10, "max_eval_samples": 4}
    _, texts = vocabulary_corpus(task)
    rows = pq.read_table(mirror_path("ncbi_disease", "ncbi_disease", "train")).slice(0, 10)
    assert list(texts) == [" ".join(words) for words in rows.column("tokens").to_pylist()]
    with pytest.raises(PlmbenchError, match="no example of its 10 training .*objective=mlm"):
        corpus_datamodule(task, tokenizer, MaskingConfig(), nsp=True).setup("fit")


def test_an_evaluation_carves_the_held_out_documents_a_training_run_held_out(mirror,
                                                                             tokenizer) -> None:
    """heldout_of: a task without a training split holds out what a run with the same caps did."""
    training = {**WIKIPEDIA, "max_train_samples": 12, "eval_documents": 3,
                "splits": {"train": "train", "eval": ["heldout"]}}
    trained = corpus_datamodule(training, tokenizer, MaskingConfig(), nsp=False)
    trained.setup("fit")
    evaluation = {**training, "splits": {"train": None, "eval": ["heldout"]},
                  "heldout_of": "train"}
    evaluated = corpus_datamodule(evaluation, tokenizer, MaskingConfig(), nsp=False)
    evaluated.setup("fit")
    assert evaluated.train_data is None
    assert [e["input_ids"] for e in evaluated.eval_data[0]] == [
        e["input_ids"] for e in trained.eval_data[0]]
    held_out = split_documents(evaluation, "heldout")
    assert held_out == split_documents(training, "heldout") and len(held_out) == 3
    articles = pq.read_table(mirror_path("wikipedia_en_sample", "enwiki_pages_56.5M-57.0M",
                                         "train")).column("text").to_pylist()[:12]
    for document, article in zip(held_out, articles[-3:], strict=True):  # the last 3 of 12
        assert " ".join(document).split() == article.split()
    with pytest.raises(PlmbenchError, match="give the task splits.train, or heldout_of"):
        corpus_datamodule({**evaluation, "heldout_of": None}, tokenizer, MaskingConfig(),
                          nsp=False).setup("fit")
