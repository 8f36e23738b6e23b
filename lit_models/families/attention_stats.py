"""What each attention head looks at, summed over batches of attention maps.

Clark et al. 2019, "What Does BERT Look At? An Analysis of BERT's Attention":
- §3.1-3.2: the average attention a head gives to the [CLS] token, to [SEP] tokens, to
  punctuation, to the previous and the next token and to the token itself (every real query
  counted; a query without a previous / next real token is left out of that average);
- §3.3: the entropy of each head's attention distribution (broad or focused heads), against the
  entropy of uniform attention over the same keys;
- §4.1-4.2: word-level attention (attention *to* a word split into several tokens is the sum over
  its tokens, attention *from* it the mean over its tokens) and each head as a dependency parser:
  every word's head predicted as the word it attends to most ("dep->head"), or as the word that
  attends to it most ("head<-dep"), never itself or a special token.

Voita et al. 2019, "Analyzing Multi-Head Self-Attention: Specialized Heads Do the Heavy
Lifting, the Rest Can Be Pruned", §4: a head is *positional* when its most attended key is the
previous or the next token for at least 90% of the queries, *rare-token* when it is most often the
least frequent token of the sentence.

Every function takes one layer's (or every layer's) attention probabilities [B, heads, T, T] on
the device they were computed on and returns sums and counts, which the caller adds up over
batches; averages are sums / counts.
"""

from collections.abc import Sequence

import torch
from torch import Tensor

#: the sums ``attention_sums`` returns per [layer, head], each with its count under "<name>_n"
STATISTICS = ("cls", "sep", "punctuation", "previous", "next", "self", "entropy",
              "argmax_previous", "argmax_next", "rarest")


def _per_head(values: Tensor, queries: Tensor) -> Tensor:
    """Sum over the batch and the selected queries: values [B, H, T], queries [B, T] -> [H]."""
    return (values * queries[:, None, :].to(values.dtype)).sum((0, 2))


def attention_sums(attentions: Sequence[Tensor], input_ids: Tensor, attention_mask: Tensor | None,
                   cls_id: int | None, sep_id: int | None, special: Tensor, punctuation: Tensor,
                   frequencies: Tensor) -> dict[str, Tensor]:
    """Per statistic, the sum [layers, heads] over the batch's real queries and its count.

    ``special`` / ``punctuation`` bool [vocab] (special and punctuation tokens);
    ``frequencies`` [vocab] token counts in the analysed text (the rarest token of a sequence is
    its real, non-special token of the lowest count; queries are its real non-special tokens)."""
    B, T = input_ids.shape
    real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None \
        else attention_mask.bool()
    is_special = special[input_ids]
    keys = {"cls": input_ids == cls_id if cls_id is not None else None,
            "sep": input_ids == sep_id if sep_id is not None else None,
            "punctuation": punctuation[input_ids] & ~is_special}
    has_previous = real.clone()
    has_previous[:, 0] = False
    has_next = torch.zeros_like(real)
    has_next[:, :-1] = real[:, 1:]
    score = frequencies[input_ids].masked_fill(is_special | ~real, float("inf"))
    rarest = score.argmin(-1)  # [B]
    content = real & ~is_special
    positions = torch.arange(T, device=input_ids.device)
    out: dict[str, list[Tensor]] = {name: [] for name in STATISTICS}
    for a in attentions:
        a = a.float()
        for name, where in keys.items():
            if where is not None:
                out[name].append(_per_head((a * where[:, None, None, :]).sum(-1), real))
        out["previous"].append(_per_head(
            torch.nn.functional.pad(a.diagonal(-1, -2, -1), (1, 0)), has_previous))
        out["next"].append(_per_head(
            torch.nn.functional.pad(a.diagonal(1, -2, -1), (0, 1)), has_next))
        out["self"].append(_per_head(a.diagonal(0, -2, -1), real))
        entropy = -(a * a.clamp_min(1e-30).log()).sum(-1)
        out["entropy"].append(_per_head(entropy, real))
        offset = a.argmax(-1) - positions
        out["argmax_previous"].append(_per_head((offset == -1).float(), has_previous))
        out["argmax_next"].append(_per_head((offset == 1).float(), has_next))
        out["rarest"].append(_per_head((a.argmax(-1) == rarest[:, None, None]).float(), content))
    counts = {"cls": real, "sep": real, "punctuation": real, "previous": has_previous,
              "next": has_next, "self": real, "entropy": real, "argmax_previous": has_previous,
              "argmax_next": has_next, "rarest": content}
    sums = {name: torch.stack(values) for name, values in out.items() if values}
    for name in list(sums):
        sums[f"{name}_n"] = counts[name].sum().float()
    keys_seen = real.sum(-1, keepdim=True).expand(B, T).float()
    # uniform attention over the real keys (a causal net sees fewer: an upper bound there)
    sums["uniform_entropy"] = (keys_seen.log() * real).sum()
    sums["uniform_entropy_n"] = real.sum().float()
    return sums


def word_attention(attention: Tensor, word_ids: Tensor, words: int) -> Tensor:
    """Token-level [B, H, T, T] -> word-level [B, H, W, W] (Clark et al. 2019, §4.1): attention
    to a word sums over its tokens, attention from a word averages over its tokens; special and
    padding tokens (word id -1) belong to no word."""
    member = torch.nn.functional.one_hot(word_ids.clamp_min(0), words).to(attention.dtype)
    member = member * (word_ids >= 0)[..., None]  # [B, T, W]
    to_words = attention @ member[:, None]  # [B, H, T, W]
    from_words = member.transpose(1, 2)[:, None] @ to_words  # [B, H, W, W]
    tokens_per_word = member.sum(1).clamp_min(1)  # [B, W]
    return from_words / tokens_per_word[:, None, :, None]


def head_predictions(attentions: Sequence[Tensor], word_ids: Tensor) -> Tensor:
    """[B, layers, heads, 2, W]: per word, the word each head predicts as its syntactic head
    (0-based), "dep->head" (the word it attends to most) then "head<-dep" (the word attending to
    it most), itself excluded (Clark et al. 2019, §4.2)."""
    words = int(word_ids.max()) + 1
    layers = []
    for a in attentions:
        w = word_attention(a.float(), word_ids, words)
        w = w.masked_fill(torch.eye(words, dtype=torch.bool, device=w.device), float("-inf"))
        layers.append(torch.stack([w.argmax(-1), w.argmax(-2)], 2))  # [B, H, 2, W]
    return torch.stack(layers, 1)
