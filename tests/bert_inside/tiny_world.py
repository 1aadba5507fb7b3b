"""A tiny stand-in for the hub downloads of the BERT-from-the-inside assignment, built on the fly: the 1-layer
BertModel and WordPiece vocabulary of tests/transformers_bert/tiny_world.py (saved like a hub folder), and an
IMDB-like parquet file whose reviews have several sentences (for the NSP pairs) and carry their sentiment in a few
words (for fine-tuning). No hub, no ../shared.
"""
from __future__ import annotations

import random
from pathlib import Path

from tests.transformers_bert import tiny_world as transformers_world
from tests.transformers_bert.tiny_world import NEGATIVE, NEUTRAL, POSITIVE, save_encoder


def review(rng: random.Random, label: int) -> str:
    """Two to four sentences of neutral words ending with '.', two or three words of the label's sentiment among
    them, and an HTML line break."""
    sentences = []
    for _ in range(rng.randint(2, 4)):
        sentences.append([rng.choice(NEUTRAL) for _ in range(rng.randint(2, 6))])
    for _ in range(rng.randint(2, 3)):
        words = rng.choice(sentences)
        words.insert(rng.randrange(len(words) + 1), rng.choice(POSITIVE if label else NEGATIVE))
    text = " ".join(" ".join(words) + " ." for words in sentences)
    return text.replace(" . ", " .<br /><br />", 1)


def save_imdb(path: Path, n_train: int = 800, n_test: int = 100, seed: int = 0) -> Path:
    """An IMDB-shaped parquet file (orig_split, label, review) of this module's several-sentence reviews."""
    return transformers_world.save_imdb(path, n_train, n_test, seed, make_review=review)


def build_world(root: Path, n_train: int = 800, n_test: int = 100) -> dict:
    """{"root", "encoder", "imdb"} under root."""
    return {"root": root, "encoder": save_encoder(root / "tiny-bert"),
            "imdb": save_imdb(root / "imdb.parquet", n_train, n_test)}
