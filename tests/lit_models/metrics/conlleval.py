"""CoNLL's ``conlleval`` chunk counting (Tjong Kim Sang & De Meulder 2003; the Perl script's
``startOfChunk`` / ``endOfChunk`` and its correct-chunk bookkeeping), transcribed for the IOB2 tags
plmbench writes, so the tests score tag sequences with the definition ``seqeval`` reimplements
and not with ``seqeval`` itself. Sentences are one stream with an ``O`` between them, as the
script reads blank lines."""


def _split(tag):
    return ("O", "") if tag == "O" else tuple(tag.split("-", 1))


def end_of_chunk(prev_tag, tag, prev_type, type_):
    return (
        (prev_tag in ("B", "I") and tag in ("B", "O"))
        or (prev_tag != "O" and prev_type != type_)
    )


def start_of_chunk(prev_tag, tag, prev_type, type_):
    return (
        (tag == "B")
        or (prev_tag == "O" and tag == "I")
        or (tag != "O" and prev_type != type_)
    )


def conlleval(gold_sentences, guessed_sentences):
    """(precision, recall, FB1) on 0..1, as conlleval prints them / 100 (0 when undefined)."""
    correct_chunks = found_correct = found_guessed = 0
    in_correct = False
    last_correct, last_correct_type = "O", ""
    last_guessed, last_guessed_type = "O", ""
    stream = []
    for gold, guessed in zip(gold_sentences, guessed_sentences, strict=True):
        stream += list(zip(gold, guessed, strict=True)) + [("O", "O")]
    for gold, guessed in stream:
        correct, correct_type = _split(gold)
        guess, guessed_type = _split(guessed)
        if in_correct:
            ends_correct = end_of_chunk(last_correct, correct, last_correct_type, correct_type)
            ends_guessed = end_of_chunk(last_guessed, guess, last_guessed_type, guessed_type)
            if ends_correct and ends_guessed and last_guessed_type == last_correct_type:
                in_correct = False
                correct_chunks += 1
            elif ends_correct != ends_guessed or guessed_type != correct_type:
                in_correct = False
        starts_correct = start_of_chunk(last_correct, correct, last_correct_type, correct_type)
        starts_guessed = start_of_chunk(last_guessed, guess, last_guessed_type, guessed_type)
        if starts_correct and starts_guessed and guessed_type == correct_type:
            in_correct = True
        found_correct += starts_correct
        found_guessed += starts_guessed
        last_correct, last_correct_type = correct, correct_type
        last_guessed, last_guessed_type = guess, guessed_type
    if in_correct:
        correct_chunks += 1
    precision = correct_chunks / found_guessed if found_guessed else 0.0
    recall = correct_chunks / found_correct if found_correct else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1
