"""A small WMT fixture in the hub's schema (one ``translation`` column of {language: sentence}),
written by the tests into a temporary mirror: the WMT corpora are not in the offline mirror.

The "Romanian" side is an English sentence translated word by word through a small lexicon (real
Romanian words, diacritics included), so a model can learn the mapping and BLEU has something to
find; the "German" side likewise."""

import random
from pathlib import Path

import datasets

from tests.conftest import MIRROR_CANDIDATES

LEXICON = {  # English -> (Romanian, German)
    "the": ("", "die"), "cat": ("pisica", "Katze"), "dog": ("câinele", "Hund"),
    "sees": ("vede", "sieht"), "eats": ("mănâncă", "isst"), "a": ("un", "ein"),
    "fish": ("pește", "Fisch"), "house": ("casa", "Haus"), "big": ("mare", "groß"),
    "small": ("mică", "klein"), "today": ("astăzi", "heute"), "and": ("și", "und"),
    "water": ("apă", "Wasser"), "drinks": ("bea", "trinkt"), "we": ("noi", "wir"),
    "sleep": ("dormim", "schlafen"), "in": ("în", "in"), "garden": ("grădină", "Garten"),
}
WORDS = list(LEXICON)
SPLITS = {"train": 48, "validation": 8, "test": 8}


def sentence_pair(rng: random.Random, side: int) -> tuple[str, str]:
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 9))]
    english = " ".join(words).capitalize() + "."
    other = " ".join(w for w in (LEXICON[word][side] for word in words) if w)
    return english, other.capitalize() + "."


def write_wmt(root: Path, dataset: str = "wmt16", config: str = "ro-en") -> Path:
    """``root/<dataset>/<config>/{train,validation,test}.parquet`` in the hub's wmt schema."""
    language = config.split("-")[0]  # ro-en, de-en: the non-English side
    side = ("ro", "de").index(language)
    for split, rows in SPLITS.items():
        rng = random.Random(f"{dataset}/{config}/{split}")
        pairs = [sentence_pair(rng, side) for _ in range(rows)]
        path = root / dataset / config / f"{split}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(
            {"translation": [{language: other, "en": english} for english, other in pairs]}
        ).to_parquet(str(path))
    return root


def mirror_with_wmt(root: Path) -> Path:
    """``root``: the real mirror's datasets linked (when there is one) plus the WMT fixture."""
    real = next((path for path in MIRROR_CANDIDATES if (path / "glue").is_dir()), None)
    for dataset in real.iterdir() if real else ():
        if dataset.is_dir():
            (root / dataset.name).symlink_to(dataset, target_is_directory=True)
    write_wmt(root, "wmt16", "ro-en")
    return write_wmt(root, "wmt14", "de-en")
