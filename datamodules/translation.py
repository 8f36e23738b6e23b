"""Translation data: WMT sentence pairs (WMT'16 English-Romanian, Bojar et al. 2016; WMT'14
English-German, Bojar et al. 2014) in the hub's schema, one ``translation`` column of
{language code: sentence} per row, read in either direction (``source_lang`` -> ``target_lang``).

The source is prefixed with the model's task prefix, a template naming both languages (T5:
"translate English to Romanian: ", Raffel et al. 2020, §2.4 and Appendix D; BART and GPT-2: none),
filled from ``language_names``. The examples, the decoder-only layout and the raw ``texts`` are
those of ``summarization.SummarizationDataModule``; references are the raw target sentences, which
BLEU scores untokenized (``lit_models/metrics/bleu.py``).
"""

import json
from collections.abc import Iterator, Mapping

from omegaconf import DictConfig

from datamodules.base import task_config
from datamodules.errors import PlmbenchError
from datamodules.sources import load_split
from datamodules.summarization import SummarizationDataModule

REQUIRED_KEYS = (
    "name", "dataset", "config", "translation_field", "source_lang", "target_lang",
    "language_names", "splits", "source_max_length", "target_max_length", "batch_size",
)


def checked(task: Mapping | DictConfig) -> dict:
    """The task config, its two languages known and different."""
    task = task_config(task, REQUIRED_KEYS)
    source, target, names = task["source_lang"], task["target_lang"], task["language_names"]
    unknown = [code for code in (source, target) if code not in names]
    if unknown or source == target:
        raise PlmbenchError(
            f"task {task['name']}: source_lang={source} and target_lang={target} must be two "
            f"different languages of language_names ({', '.join(names)}); fix the overrides"
        )
    return task


def prefix(task: Mapping) -> str:
    """The task prefix with both languages' names ("translate English to Romanian: ")."""
    names = task["language_names"]
    template = task.get("source_prefix") or ""
    return template.format(source=names[task["source_lang"]], target=names[task["target_lang"]])


def pairs(task: Mapping, rows: Mapping[str, list], language: str) -> list[str]:
    """The ``language`` side of every pair of a batch of raw rows; a row without it is refused."""
    try:
        return [pair[language] for pair in rows[task["translation_field"]]]
    except (KeyError, TypeError):
        raise PlmbenchError(
            f"task {task['name']}: a row of {task['dataset']}/{task['config']} has no "
            f"{task['translation_field']}.{language} sentence; the column holds "
            "{language code: sentence} pairs (the hub's wmt schema)"
        ) from None


def vocabulary_corpus(task: Mapping | DictConfig) -> tuple[str, Iterator[str]]:
    """(what identifies it, the texts) of the capped training split: both languages' sentences."""
    task = checked(task)
    split, cap = task["splits"]["train"], task.get("max_train_samples")
    raw = load_split(task["dataset"], task["config"], split, [task["translation_field"]],
                     task.get("hub_id"))
    rows = (raw if cap is None else raw.select(range(min(cap, len(raw))))).to_dict()
    languages = sorted((task["source_lang"], task["target_lang"]))
    key = json.dumps(["translation", task["dataset"], task["config"], split, raw._fingerprint,
                      languages, cap])
    return key, (text for language in languages for text in pairs(task, rows, language))


class TranslationDataModule(SummarizationDataModule):
    """A WMT pair's source sentence (prefixed) -> its target sentence."""

    required_keys = REQUIRED_KEYS

    def __init__(self, task, tokenizer, decoder_start_token_id, seed=0) -> None:
        super().__init__(checked(task), tokenizer, decoder_start_token_id, seed)

    def columns(self) -> list[str]:
        return [self.task["translation_field"]]

    def sources(self, rows: dict[str, list]) -> list[str]:
        start = prefix(self.task)
        return [start + text for text in pairs(self.task, rows, self.task["source_lang"])]

    def targets(self, rows: dict[str, list]) -> list[str]:
        return pairs(self.task, rows, self.task["target_lang"])
