"""Winnowing (Schleimer, Wilkerson and Aiken 2003, as MOSS and copydetect): a document's fingerprints are the
smallest hash of every window of `WINDOW` consecutive k-gram hashes (k = `K` tokens).

Guarantee: any run of at least K + WINDOW - 1 tokens that two documents share gives both at least one common
fingerprint; a run shorter than K gives none (noise). Hashes are deterministic (CRC-32 of each token, then
Python's hash of a tuple of ints, which is not salted per process), so the same code gives the same fingerprints
in every run. Each fingerprint keeps the lines its k-gram spans, for highlighting.
"""
from __future__ import annotations

import zlib

import numpy as np

from autograder.similarity.normalise import Token

K = 12  # tokens per k-gram: about one line of code in the node tokens of normalise.py
WINDOW = 6
MASK = (1 << 63) - 1
_IDS: dict[str, int] = {}


def _token_id(text: str) -> int:
    found = _IDS.get(text)
    if found is None:
        found = _IDS[text] = zlib.crc32(text.encode("utf-8", "replace"))
        if len(_IDS) > 1_000_000:  # (a cache: names of a hostile notebook must not grow it without bound)
            _IDS.clear()
    return found


def kgram_hashes(tokens: list[Token], k: int = K) -> list[int]:
    """A hash of each run of `k` tokens (63 bits, the same in every process); one hash of the whole when there are
    fewer than `k`."""
    ids = [_token_id(t.text) for t in tokens]
    if len(ids) < k:
        return [hash(tuple(ids)) & MASK] if ids else []
    return [hash(tuple(ids[i:i + k])) & MASK for i in range(len(ids) - k + 1)]


def winnow_positions(hashes: list[int], window: int = WINDOW) -> list[int]:
    """Positions of the fingerprints: in each window the rightmost smallest hash, each position once."""
    if len(hashes) <= window:
        return [min(range(len(hashes)), key=lambda i: (hashes[i], -i))] if hashes else []
    chosen: list[int] = []
    last = -1
    for start in range(len(hashes) - window + 1):
        best = start
        for i in range(start + 1, start + window):
            if hashes[i] <= hashes[best]:
                best = i
        if best != last:
            chosen.append(best)
            last = best
    return chosen


def fingerprints(tokens: list[Token], k: int = K, window: int = WINDOW) -> np.ndarray:
    """The document's fingerprints as a sorted array of unique uint64."""
    hashes = kgram_hashes(tokens, k)
    return np.unique(np.array([hashes[i] for i in winnow_positions(hashes, window)], dtype=np.uint64))


def located(tokens: list[Token], k: int = K, window: int = WINDOW) -> dict[int, list[tuple[int, int]]]:
    """fingerprint -> the (first line, last line) of each k-gram that gives it (for the side-by-side pages)."""
    hashes = kgram_hashes(tokens, k)
    out: dict[int, list[tuple[int, int]]] = {}
    for i in winnow_positions(hashes, window):
        span = tokens[i:i + k] or tokens[i:i + 1]
        out.setdefault(hashes[i], []).append((min(t.line for t in span), max(t.line for t in span)))
    return out
