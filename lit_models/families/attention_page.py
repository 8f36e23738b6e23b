"""The attention analysis's page (``attention.html``): a layer x head heatmap of every statistic
(Clark et al. 2019, Figures 2-4), the positional and rare-token heads (Voita et al. 2019), the
dependency table (Clark et al., Table 1) and the attention maps of a few sentences in the heads
that stand out (Figure 1), as inline SVG (``lit_models/core/svg.py``): it opens offline."""

from collections.abc import Mapping, Sequence

import torch

from lit_models.core import svg

#: statistic -> what its heatmap shows
TITLES = {
    "cls": "attention to the first special token ([CLS], <s>)",
    "sep": "attention to separators ([SEP], </s>)",
    "punctuation": "attention to punctuation",
    "previous": "attention to the previous token",
    "next": "attention to the next token",
    "self": "attention to the token itself",
    "entropy": "entropy of the attention distribution (nats)",
    "argmax_previous": "share of queries attending most to the previous token",
    "argmax_next": "share of queries attending most to the next token",
    "rarest": "share of queries attending most to the sentence's rarest token",
}
#: heads shown on the example sentences: (label, statistic, pick the largest value)
STANDOUTS = (("attends to the previous token", "previous", True),
             ("attends to the next token", "next", True),
             ("attends to [SEP]", "sep", True), ("attends to [CLS]", "cls", True),
             ("attends to punctuation", "punctuation", True),
             ("most focused (lowest entropy)", "entropy", False),
             ("broadest (highest entropy)", "entropy", True))


def standout_heads(heads: Mapping[str, list], dependencies: Mapping | None
                   ) -> list[tuple[str, int, int]]:
    """(label, layer, head) of the heads shown on the example sentences."""
    chosen = []
    for label, name, largest in STANDOUTS:
        if name in heads:
            values = torch.tensor(heads[name])
            best = int(values.argmax() if largest else values.argmin())
            chosen.append((label, best // values.shape[1], best % values.shape[1]))
    if dependencies and "relations" in dependencies:
        best = dependencies["relations"]["all"]
        chosen.append((f"best dependency head ({best['direction']})", best["layer"],
                       best["head"]))
    return chosen


def example_maps(module, dm, tokenizer, heads: Mapping[str, list], dependencies: Mapping | None,
                 count: int) -> list[dict]:
    """The attention maps of the standout heads on the ``count`` shortest sentence pairs of the
    text split of 8 tokens or more."""
    examples = sorted((e for e in dm.eval_data[0] if len(e["input_ids"]) >= 8),
                      key=lambda e: len(e["input_ids"]))[:count]
    chosen = standout_heads(heads, dependencies)
    maps = []
    module.eval()
    for example in examples:
        with torch.no_grad():
            attentions = module.attentions(dm.collate_fn([example]))
        tokens = [tokenizer.backend.id_to_token(i) for i in example["input_ids"]]
        maps.append({"tokens": tokens, "maps": [
            {"label": label, "layer": layer, "head": head,
             "values": attentions[layer][0, head].tolist()} for label, layer, head in chosen]})
    return maps


def _table(rows: Sequence[Sequence[object]], header: Sequence[str], name: str) -> str:
    head = "".join(f"<th>{svg.esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f'<td class="{"num" if isinstance(c, int | float) else ""}">{svg.esc(c)}</td>'
        for c in row) + "</tr>" for row in rows)
    return f'<table id="{name}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def attention_page(findings: Mapping, maps: list[dict], cfg: Mapping) -> str:
    heads = findings["heads"]
    layers, per_layer = len(next(iter(heads.values()))), len(next(iter(heads.values()))[0])
    rows, columns = [f"layer {i}" for i in range(layers)], [f"head {j}" for j in range(per_layer)]
    figures = [svg.heatmap(TITLES[name], name, values, rows, columns, "layer", "head")
               for name, values in heads.items()]
    sections = ["<h2>Per layer and head</h2>", '<div class="plots">', *figures, "</div>",
                "<h2>Positional and rare-token heads (Voita et al. 2019)</h2>",
                _table([(f"{layer}.{head}", offset, f"{share:.3f}")
                        for layer, head, offset, share in findings["positional_heads"]],
                       ["head", "offset", "share of queries"], "positional"),
                _table([(f"{layer}.{head}", f"{share:.3f}")
                        for layer, head, share in findings["rare_token_heads"]],
                       ["head", "share of queries"], "rare")]
    dependencies = findings["dependencies"]
    if dependencies and "relations" in dependencies:
        table = [(relation, r["count"], f"{r['layer']}.{r['head']}", r["direction"],
                  f"{100 * r['accuracy']:.1f}", r["offset"], f"{100 * r['baseline']:.1f}")
                 for relation, r in dependencies["relations"].items()]
        sections += [f"<h2>Dependency relations (Clark et al. 2019, Table 1; "
                     f"{dependencies['sentences']} sentences)</h2>",
                     _table(table, ["relation", "words", "best head", "direction",
                                    "accuracy (%)", "best offset", "offset accuracy (%)"],
                            "dependencies"),
                     '<div class="plots">', *(svg.heatmap(
                         f"dependency accuracy over every word, {direction}",
                         f"dependency-{i}", accuracy, rows, columns, "layer", "head")
                         for i, (direction, accuracy) in enumerate(
                             dependencies["accuracy"].items())), "</div>"]
    elif dependencies:
        sections.append(f'<p class="note">No dependency analysis: '
                        f'{svg.esc(dependencies["skipped"])}</p>')
    for n, example in enumerate(maps):
        tokens = example["tokens"]
        sections += [f"<h2>Example {n + 1}</h2>", '<div class="plots">', *(
            svg.heatmap(f"layer {m['layer']} head {m['head']}: {m['label']}",
                        f"example-{n}-{m['layer']}-{m['head']}", m["values"], tokens, tokens,
                        "query", "key", cell=max(6, min(14, 640 // len(tokens))),
                        value_format=".2f")
            for m in example["maps"]), "</div>"]
    note = (f"model {cfg['model']['name']} from {cfg['init_from']}; {findings['examples']} "
            f"sentence pairs of {cfg['task']['text']['name']}; every real query counted")
    return svg.page("What the attention heads look at", sections, note)
