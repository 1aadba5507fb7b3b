"""Every pair of submissions scored per part through an inverted index of fingerprints, never pair by pair.

For each part (and apart, for written answers): fingerprints of the starter code are taken out; so are those that
a large share of the class has (`Settings.common_share` of the current submissions, and at least
`Settings.common_min` of them: the natural idioms of a short function, which say nothing about copying). The rest
form a sparse matrix, submissions x fingerprints, whose columns are the inverted index (fingerprint -> the
submissions that hold it); its product with its transpose counts, for every pair at once, the fingerprints they
share, in C, in memory that grows with the pairs that share something, not with every pair's text.

A pair's score in a part is shared / (fingerprints of the smaller side): 1.0 when one side's code is all in the
other's (a copy with code added stays a copy). A part scores only when both sides hold at least
`Settings.min_fingerprints` there (a one-line answer proves nothing). A pair is flagged when some part scores at
least `Settings.threshold` with at least `Settings.min_shared` fingerprints in common. Pairs of two earlier-term
submissions are not scored (`--past` are sources, not the class). Closeness to the answer key is measured the same
way, but without taking out the class's common code (a key that leaked to many students is common code).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from autograder.similarity.sources import CURRENT, KEY, PAST, Source

CODE, TEXT = "code", "written answers"


@dataclass
class Settings:
    """The thresholds of a comparison (the module docstring says how each is used); scores are shares, 0 to 1."""

    threshold: float = 0.6  # a part's score from which a pair is flagged
    text_threshold: float = 0.5
    min_fingerprints: int = 6  # each side must hold this many fingerprints in a part for it to score
    min_shared: int = 5
    common_share: float = 0.3  # a fingerprint in this share of the class is common code
    common_min: int = 10  # ... and in at least this many submissions
    floor: float = 0.2  # pairs scoring below this in every part are not kept (memory)


@dataclass
class PartScore:
    """A pair's fingerprints in one part: those both sides hold, and each side's count."""

    shared: int
    size_a: int
    size_b: int

    @property
    def score(self) -> float:
        """shared / (the smaller side's fingerprints): 0 to 1."""
        return self.shared / max(1, min(self.size_a, self.size_b))


@dataclass
class Pair:
    """Two sources compared on one channel (CODE or TEXT): a PartScore for each part they share code in, where both
    sides hold `Settings.min_fingerprints` and the score reaches `Settings.floor`."""

    a: int  # index into the sources; a < b
    b: int
    channel: str
    parts: dict[str, PartScore] = field(default_factory=dict)
    flagged: bool = False

    @property
    def score(self) -> float:
        """The pair's score: its highest part's."""
        return max((p.score for p in self.parts.values()), default=0.0)

    @property
    def shared(self) -> int:
        """Fingerprints in common, over every part."""
        return sum(p.shared for p in self.parts.values())


@dataclass
class Comparison:
    """What `compare` found, for the report: the pairs, each submission's closeness to the answer key, the groups,
    and the common code taken out of each part (shown on the pages)."""

    sources: list[Source]
    pairs: list[Pair]  # both channels, flagged first, then by score
    key_scores: dict[int, dict[str, PartScore]]  # current source -> part -> closeness to the answer key
    key_flagged: set[int]
    groups: list[list[int]]  # three or more students joined by flagged code pairs
    settings: Settings
    common: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)  # (channel, part) -> common code


def _fps(src: Source, channel: str) -> dict[str, np.ndarray]:
    return src.code_fps if channel == CODE else src.text_fps


def compare(sources: list[Source], starter: dict[str, np.ndarray], settings: Settings | None = None) -> Comparison:
    """`starter`: per channel, the fingerprints of the notebook as handed out (taken out everywhere)."""
    settings = settings or Settings()
    live = [i for i, s in enumerate(sources) if not s.problem and s.kind != KEY]
    result = Comparison(sources, [], {}, set(), [], settings)
    pairs: dict[tuple[int, int, str], Pair] = {}
    for channel in (CODE, TEXT):
        parts = sorted({p for i in live for p in _fps(sources[i], channel)})
        for part in parts:
            _score_part(sources, live, channel, part, starter.get(channel), settings, pairs, result)
    for pair in pairs.values():
        limit = settings.threshold if pair.channel == CODE else settings.text_threshold
        pair.flagged = any(p.score >= limit and p.shared >= settings.min_shared for p in pair.parts.values())
    result.pairs = sorted(pairs.values(), key=lambda p: (not p.flagged, p.channel != CODE, -p.score, p.a, p.b))
    _key_closeness(sources, live, starter.get(CODE), settings, result)
    result.groups = _groups([p for p in result.pairs if p.flagged and p.channel == CODE], sources)
    return result


def _score_part(sources, live, channel, part, starter, settings, pairs, result) -> None:
    rows = [i for i in live if len(_fps(sources[i], channel).get(part, ())) > 0]
    if len(rows) < 2:
        return
    arrays = [_fps(sources[i], channel)[part] for i in rows]
    if starter is not None and len(starter):
        arrays = [a[~np.isin(a, starter, assume_unique=True)] for a in arrays]
    lengths = np.array([len(a) for a in arrays])
    flat = np.concatenate(arrays) if lengths.sum() else np.zeros(0, np.uint64)
    columns, inverse, df = np.unique(flat, return_inverse=True, return_counts=True)
    row_of = np.repeat(np.arange(len(rows)), lengths)
    current = np.array([sources[i].kind == CURRENT for i in rows])
    df_current = np.bincount(inverse, weights=current[row_of], minlength=len(columns))
    common = df_current >= max(settings.common_min, settings.common_share * current.sum())
    result.common[(channel, part)] = columns[common]
    keep = ~common[inverse]
    matrix = sparse.csr_matrix((np.ones(keep.sum(), np.int32), (row_of[keep], inverse[keep])),
                               shape=(len(rows), len(columns)))
    sizes = np.asarray(matrix.sum(axis=1)).ravel()
    shared = sparse.triu(matrix @ matrix.T, k=1).tocoo()
    a, b, n = shared.row, shared.col, shared.data
    smaller = np.minimum(sizes[a], sizes[b])
    ok = (smaller >= settings.min_fingerprints) & (n / np.maximum(smaller, 1) >= settings.floor)
    ok &= np.array([sources[rows[x]].kind == CURRENT or sources[rows[y]].kind == CURRENT
                    for x, y in zip(a, b)], dtype=bool) if len(a) else ok
    for x, y, count in zip(a[ok], b[ok], n[ok]):
        i, j = sorted((rows[x], rows[y]))
        pair = pairs.setdefault((i, j, channel), Pair(i, j, channel))
        size_i, size_j = (sizes[x], sizes[y]) if rows[x] == i else (sizes[y], sizes[x])
        pair.parts[part] = PartScore(int(count), int(size_i), int(size_j))


def _key_closeness(sources, live, starter, settings, result) -> None:
    keys = [s for s in sources if s.kind == KEY and not s.problem]
    if not keys:
        return
    key = keys[0].code_fps
    for i in live:
        if sources[i].kind != CURRENT:
            continue
        scores = {}
        for part, fps in sources[i].code_fps.items():
            if starter is not None and len(starter):
                fps = fps[~np.isin(fps, starter, assume_unique=True)]
            theirs = key.get(part, np.zeros(0, np.uint64))
            if starter is not None and len(starter):
                theirs = theirs[~np.isin(theirs, starter, assume_unique=True)]
            if min(len(fps), len(theirs)) < settings.min_fingerprints:
                continue
            score = PartScore(len(np.intersect1d(fps, theirs, assume_unique=True)), len(fps), len(theirs))
            if score.score >= settings.floor:
                scores[part] = score
        if scores:
            result.key_scores[i] = scores
            if any(p.score >= settings.threshold and p.shared >= settings.min_shared for p in scores.values()):
                result.key_flagged.add(i)


def _groups(flagged: list[Pair], sources: list[Source]) -> list[list[int]]:
    """Connected components of flagged pairs with three or more members, largest first."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in flagged:
        parent[root(p.a)] = root(p.b)
    members: dict[int, list[int]] = {}
    for x in list(parent):
        members.setdefault(root(x), []).append(x)
    groups = [sorted(m, key=lambda i: sources[i].id) for m in members.values() if len(m) >= 3]
    return sorted(groups, key=lambda g: (-len(g), sources[g[0]].id))


__all__ = ["CODE", "TEXT", "PAST", "Comparison", "Pair", "PartScore", "Settings", "compare"]
