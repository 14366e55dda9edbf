"""Sub-batches of similar length, for models that run on zero-padded batches."""
from __future__ import annotations

from typing import List, Sequence


def length_batches(indices: Sequence[int], lengths: Sequence[int], budget: int) -> List[List[int]]:
    """Split ``indices`` into sub-batches of similar length.

    A zero-padded batch costs its number of rows times its longest row, so
    one long item would otherwise make every short one pay for its length.
    The indices are taken in order of ``lengths[i]`` and a sub-batch grows
    while its padded size (rows x longest row) stays within ``budget``
    (positions); ``budget = 0`` puts each item alone. Returns the indices,
    grouped, shortest first.
    """
    batches: List[List[int]] = []
    current: List[int] = []
    for i in sorted(indices, key=lambda j: lengths[j]):
        if current and (len(current) + 1) * lengths[i] > budget:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
