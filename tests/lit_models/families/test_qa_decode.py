"""Span decoding: the best valid span over a question's windows, by hand-made logits."""

import torch

from lit_models.families.qa_decode import NO_SPAN_ODDS, Windows, best_spans

NEG = -20.0


def logits(T: int, **peaks: float) -> torch.Tensor:
    out = torch.full((T,), NEG)
    for position, value in peaks.items():
        out[int(position[1:])] = value
    return out


def test_best_span_over_windows_with_length_order_and_context_limits():
    # question 0 has two windows (context tokens 3..7 each, chars 10 per token from 0 / 30),
    # question 1 one window whose only high-scoring spans are invalid
    offsets = torch.tensor([-1, -1, -1, 0, 10, 20, 30, 40, -1])
    ends = torch.where(offsets >= 0, offsets + 5, -1)
    windows = Windows(
        example_index=torch.tensor([0, 0, 1]),
        cls_index=torch.tensor([0, 0, 0]),
        offset_start=torch.stack([offsets, offsets + (offsets >= 0) * 30, offsets]),
        offset_end=torch.stack([ends, ends + (ends >= 0) * 30, ends]),
    )
    start = torch.stack([
        logits(9, t0=1.0, t4=3.0),  # window 0: span 4..5 scores 3 + 2 = 5
        logits(9, t0=0.5, t3=4.0),  # window 1: span 3..4 scores 4 + 2.5 = 6.5: the best
        logits(9, t0=2.0, t1=9.0, t6=5.0, t5=1.0),  # t1 is a question token: never a start
    ])
    end = torch.stack([
        logits(9, t0=1.0, t5=2.0),
        logits(9, t0=0.5, t4=2.5, t2=9.0),  # t2 is outside the context
        logits(9, t0=3.0, t3=8.0, t7=1.0),  # 6..3 ends before it starts: 6..7 (5 + 1) wins
    ])
    spans = best_spans(start, end, windows, num_examples=2, n_best=20, max_answer_length=30)
    assert spans.start_char.tolist() == [30, 30] and spans.end_char.tolist() == [45, 45]
    # null odds: the smallest null score over the windows minus the best span score
    assert spans.null_odds.tolist() == [1.0 - 6.5, 5.0 - 6.0]
    assert spans.texts(["x" * 80, "0123456789" * 5]) == ["x" * 15, "0123456789" + "01234"]
    # max_answer_length 1: single tokens only; question 1's best is then 3..3 (NEG + 8)
    short = best_spans(start, end, windows, num_examples=2, max_answer_length=1)
    assert (short.start_char[1], short.end_char[1]) == (0, 5)
    # n_best 1: only the top start and top end of a window are paired
    top = best_spans(start, end, windows, num_examples=2, n_best=1)
    assert not top.has_span[1] and top.null_odds[1] == NO_SPAN_ODDS
