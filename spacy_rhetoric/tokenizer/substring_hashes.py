"""Hashes of many substrings at once, and text in batches of bounded size,
for the tokenizer's array code (``pkuseg_features``, ``pkuseg_merges``).

A hash says "maybe": equal strings have equal hashes, unequal ones rarely
do, so callers look up the strings whose hash they find, and their results
stay those of the lookup.
"""
from __future__ import annotations

from typing import Callable, Iterator, List, Sequence, Tuple, TypeVar

import numpy

T = TypeVar("T")
#: characters handled at once: the arrays of a batch (some 70 feature
#: indices a character, or a hash per substring) stay this size
BATCH_CHARS = 16384
#: substrings are hashed as polynomials in this odd number (a constant of
#: MurmurHash3's finaliser, whose bits are well spread) modulo 2**64,
#: numpy's wrapping uint64 arithmetic (Karp & Rabin 1987)
_HASH_BASE = 0xFF51AFD7ED558CCD
_HASH_INVERSE = pow(_HASH_BASE, -1, 2**64)


class SubstringHashes:
    """Hashes of a text's substrings, many at once (Karp & Rabin 1987).

    The hash of ``text[a:b]`` is the sum of ``(ord(text[j]) + 1) *
    _HASH_BASE ** (j - a)`` for ``j`` in ``a..b-1``, modulo 2**64: the same
    for the same characters wherever they stand. Equal strings have equal
    hashes; unequal ones rarely do, so a hash says "maybe", and the
    callers look the string up to be sure.
    """

    def __init__(self, text: str) -> None:
        codes = numpy.frombuffer(text.encode("utf-32-le"), dtype=numpy.uint32).astype(numpy.uint64) + 1
        self.prefix = numpy.zeros(len(codes) + 1, dtype=numpy.uint64)
        numpy.cumsum(codes * _powers(_HASH_BASE, len(codes)), out=self.prefix[1:])
        self.unscale = _powers(_HASH_INVERSE, len(codes) + 1)

    def of(self, starts: numpy.ndarray, ends: numpy.ndarray) -> numpy.ndarray:
        """Uint64 array: the hash of ``text[a:b]`` for each ``a, b`` of
        ``starts, ends`` (Ints1d of one length, ``0 <= a <= b <= len(text)``)."""
        return (self.prefix[ends] - self.prefix[starts]) * self.unscale[starts]


def _powers(base: int, n: int) -> numpy.ndarray:
    """Uint64 array (n,): ``base ** j`` modulo 2**64 for ``j < n``."""
    out = numpy.full(n, base, dtype=numpy.uint64)
    out[:1] = 1
    return numpy.cumprod(out, dtype=numpy.uint64)


def hashes_of(words: Sequence[str]) -> numpy.ndarray:
    """Uint64 array (len(words),): each word's :class:`SubstringHashes` hash."""
    lengths = numpy.fromiter(map(len, words), dtype=numpy.int64, count=len(words))
    ends = numpy.cumsum(lengths)
    return SubstringHashes("".join(words)).of(ends - lengths, ends)


def find_sorted(known: numpy.ndarray, keys: numpy.ndarray) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """``(positions, found)`` of ``keys`` in the sorted, non-empty array
    ``known``: Ints array, and bool array where ``known[positions] == keys``
    (numpy.isin took 2.8x as long on the tokenizer's arrays)."""
    pos = numpy.minimum(numpy.searchsorted(known, keys), len(known) - 1)
    return pos, known[pos] == keys


def contains_sorted(known: numpy.ndarray, keys: numpy.ndarray) -> numpy.ndarray:
    """Bool array: whether each of ``keys`` is in the sorted array ``known``."""
    if not len(known):
        return numpy.zeros(keys.shape, dtype=bool)
    return find_sorted(known, keys)[1]


def batches(pieces: Sequence[T], limit: int, size_of: Callable[[T], int] = len) -> Iterator[List[T]]:
    """Consecutive runs of ``pieces`` of at most ``limit`` characters in all
    (a longer piece alone); ``size_of`` counts a piece's characters."""
    batch: List[T] = []
    size = 0
    for piece in pieces:
        chars = size_of(piece)
        if batch and size + chars > limit:
            yield batch
            batch, size = [], 0
        batch.append(piece)
        size += chars
    if batch:
        yield batch
