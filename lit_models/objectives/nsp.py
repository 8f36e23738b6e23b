"""Next sentence prediction: BERT's segment pairs, RoBERTa's packed inputs, and the NSP loss.

Devlin et al. 2019 (BERT), §3.1 "Task #2: Next Sentence Prediction" and Appendix A.2: inputs are
"[CLS] A [SEP] B [SEP]"; 50% of the time B is the text that follows A (IsNext), 50% of the time a
span of a random other document (NotNext). Pairs are built as in google-research/bert
create_pretraining_data.py (create_instances_from_document): sentences are accumulated up to a
target length (shorter with probability short_seq_prob), A ends at a random sentence boundary,
and the longer segment is truncated. Labels follow Hugging Face BertForPreTraining:
0 = IsNext, 1 = NotNext.
Lan et al. 2020 (ALBERT), §3.1 "Inter-sentence coherence loss": sentence-order prediction (SOP)
takes the same pairs of consecutive segments as positives and, as negatives, the same two
segments with their order swapped (half the time), so topic cues cannot give the label away
(ALBERT's create_pretraining_data.py swaps tokens_a and tokens_b). Labels follow transformers'
AlbertForPreTraining: 0 = original order, 1 = swapped.
Without NSP or SOP, inputs are RoBERTa's FULL-SENTENCES (Liu et al. 2019, §4.2): full sentences
packed contiguously up to the length limit, across document boundaries, with an extra separator
between documents. For packed rows (``datamodules/packing.py``, Krell et al. 2021) the inputs
fill the rows exactly: FULL-SENTENCES runs on across rows (a sentence cut at a row's end goes on
in the next row), or, with attention kept inside documents, each document is cut into pieces of
the row length (and a shorter last piece) that the packing fills rows with.
"""

import random

import torch.nn.functional as F
from torch import Tensor, nn

from datamodules.errors import PlmbenchError
from datamodules.packing import PackingConfig

IS_NEXT, NOT_NEXT = 0, 1
IN_ORDER, SWAPPED = 0, 1
#: the batch key of each sentence-pair task's label
LABEL_KEYS = {"nsp": "next_sentence_label", "sop": "sentence_order_label"}

Sentence = list[int]
Document = list[Sentence]


def _flat(sentences: list[Sentence]) -> list[int]:
    return [token for sentence in sentences for token in sentence]


def _pair_example(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, label: int, cls_id: int,
    sep_id: int, label_key: str,
) -> dict:
    """[CLS] A [SEP] B [SEP] after truncating the longer side one token at a time (BERT's
    truncate_seq_pair). A loses tokens at its front and B at its back, so the A|B junction that
    the label describes stays intact (BERT picks the end at random)."""
    len_a, len_b = len(tokens_a), len(tokens_b)
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    tokens_a, tokens_b = tokens_a[len(tokens_a) - len_a :], tokens_b[:len_b]
    return {
        "input_ids": [cls_id, *tokens_a, sep_id, *tokens_b, sep_id],
        "token_type_ids": [0] * (len_a + 2) + [1] * (len_b + 1),
        label_key: label,
    }


def _random_span(
    documents: list[Document], index: int, target_length: int, rng: random.Random
) -> list[int]:
    """Sentences of a random other document, from a random one on, up to ``target_length``."""
    other = rng.randrange(len(documents) - 1)
    other += other >= index  # any document but this one
    document = documents[other]
    tokens: list[int] = []
    for sentence in document[rng.randrange(len(document)) :]:
        tokens.extend(sentence)
        if len(tokens) >= target_length:
            break
    return tokens


def _pairs_from_document(
    documents: list[Document], index: int, max_num_tokens: int, rng: random.Random,
    short_seq_prob: float, cls_id: int, sep_id: int, task: str,
) -> list[dict]:
    """BERT's create_instances_from_document for ``documents[index]``, with a fair coin; with
    ``task="sop"`` ALBERT's, where the coin swaps the two segments instead.

    BERT forces NotNext whenever a chunk holds a single sentence, which pushes the share of
    IsNext below one half. Here a chunk closes early only once it has two sentences (a long
    sentence takes the next one along, truncated later), and a lone sentence left at the end of
    a document makes no pair, so the label is always a fair coin flip.
    """
    document = documents[index]
    # sometimes a shorter target, so pretraining also sees the short inputs of fine-tuning
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = rng.randint(2, max_num_tokens)
    examples = []
    chunk: list[Sentence] = []
    chunk_length = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_length += len(document[i])
        full = chunk_length >= target_length and len(chunk) >= 2
        if i == len(document) - 1 or full:
            if len(chunk) >= 2:
                a_end = rng.randint(1, len(chunk) - 1)
                tokens_a = _flat(chunk[:a_end])
                coin = rng.random() < 0.5
                if task == "sop":
                    tokens_b, label = _flat(chunk[a_end:]), SWAPPED if coin else IN_ORDER
                    if coin:
                        tokens_a, tokens_b = tokens_b, tokens_a
                elif coin:
                    label = NOT_NEXT
                    tokens_b = _random_span(documents, index, target_length - len(tokens_a), rng)
                    i -= len(chunk) - a_end  # the unused sentences start the next chunk
                else:
                    label = IS_NEXT
                    tokens_b = _flat(chunk[a_end:])
                examples.append(
                    _pair_example(tokens_a, tokens_b, max_num_tokens, label, cls_id, sep_id,
                                  LABEL_KEYS[task])
                )
            chunk, chunk_length = [], 0
        i += 1
    return examples


def _single_example(tokens: list[int], cls_id: int, sep_id: int) -> dict:
    return {"input_ids": [cls_id, *tokens, sep_id], "token_type_ids": [0] * (len(tokens) + 2)}


def _pack_full_sentences(
    documents: list[Document], max_num_tokens: int, cls_id: int, sep_id: int
) -> list[dict]:
    """RoBERTa's FULL-SENTENCES; a sentence longer than the limit is cut to it."""
    examples = []
    packed: list[int] = []
    for document in documents:
        for k, sentence in enumerate(document):
            piece = [sep_id, *sentence] if k == 0 and packed else sentence
            if packed and len(packed) + len(piece) > max_num_tokens:
                examples.append(_single_example(packed, cls_id, sep_id))
                packed, piece = [], sentence  # an input never starts with the separator
            packed.extend(piece[: max_num_tokens - len(packed)])
    if packed:
        examples.append(_single_example(packed, cls_id, sep_id))
    return examples


def _stream_rows(documents: list[Document], max_num_tokens: int, cls_id: int, sep_id: int
                 ) -> list[dict]:
    """FULL-SENTENCES that fill their rows: every document's tokens, a separator between
    documents, cut every ``max_num_tokens`` tokens (a row never starts with the separator)."""
    examples, row = [], []
    for index, document in enumerate(documents):
        for token in ([sep_id] if index else []) + _flat(document):
            if len(row) == max_num_tokens:
                examples.append(_single_example(row, cls_id, sep_id))
                row = []
            if row or token != sep_id:
                row.append(token)
    if row:
        examples.append(_single_example(row, cls_id, sep_id))
    return examples


def _document_pieces(documents: list[Document], max_num_tokens: int, cls_id: int, sep_id: int
                     ) -> list[dict]:
    """Each document's tokens cut every ``max_num_tokens`` tokens, each piece an input of its
    own: what packed rows whose attention stays inside documents are filled with."""
    examples = []
    for document in documents:
        tokens = _flat(document)
        for start in range(0, len(tokens), max_num_tokens):
            examples.append(_single_example(tokens[start:start + max_num_tokens], cls_id, sep_id))
    return examples


def make_segment_pairs(
    documents: list[list[list[int]]],
    max_tokens: int,
    nsp: bool,
    rng: random.Random,
    short_seq_prob: float = 0.1,
    *,
    cls_id: int,
    sep_id: int,
    sop: bool = False,
    packing: PackingConfig | None = None,
) -> list[dict]:
    """Pretraining inputs from documents (-> sentences -> token ids, no special tokens).

    nsp=True: one pass of BERT's pair construction over every document; each example has
    input_ids, token_type_ids (0 for [CLS] A [SEP], 1 for B [SEP]) and next_sentence_label.
    sop=True: the same pairs of consecutive segments, swapped half the time (ALBERT), each with
    a sentence_order_label.
    Neither: FULL-SENTENCES inputs "[CLS] ... [SEP]" with token_type_ids 0 and no label; for
    packed rows (``packing.enabled``) they fill the rows: run on across documents with
    ``packing.cross_documents``, else each document cut into row-length pieces.
    Every input is at most ``max_tokens`` long, special tokens included.
    """
    documents = [doc for doc in ([s for s in doc if s] for doc in documents) if doc]
    if nsp and sop:
        raise PlmbenchError("nsp and sop are two sentence-pair tasks; pick one (ALBERT: sop)")
    if not (nsp or sop):
        if max_tokens < 3:
            raise PlmbenchError(f"max_tokens={max_tokens} leaves no room for text; use >= 3")
        if packing is None or not packing.enabled:
            return _pack_full_sentences(documents, max_tokens - 2, cls_id, sep_id)
        build = _stream_rows if packing.cross_documents else _document_pieces
        return build(documents, max_tokens - 2, cls_id, sep_id)
    if max_tokens < 5:
        raise PlmbenchError(
            f"max_tokens={max_tokens} is too short for [CLS] A [SEP] B [SEP]; use >= 5"
        )
    if nsp and len(documents) < 2:
        raise PlmbenchError(
            f"next sentence prediction needs at least 2 non-empty documents, got "
            f"{len(documents)}; use more data or nsp=False"
        )
    return [
        example
        for index in range(len(documents))
        for example in _pairs_from_document(
            documents, index, max_tokens - 3, rng, short_seq_prob, cls_id, sep_id,
            "sop" if sop else "nsp"
        )
    ]


def next_sentence_loss(pooled: Tensor, labels: Tensor, head: nn.Module) -> Tensor:
    """Cross-entropy of ``head``'s two logits (IsNext, NotNext; or in order, swapped) on the
    pooled [CLS] vector."""
    return F.cross_entropy(head(pooled), labels)
