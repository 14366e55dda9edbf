"""A document analysed in pieces, as one record: line endings and bounded memory.

``rhetoric analyze`` (both engines) does not hand a document to the pipeline
as it was read. It

1. **normalises its line endings once**: ``\\r\\n`` and a lone ``\\r`` (old
   Mac files) become ``\\n``, so the clause segmenter, which ends a sentence
   at ``\\n``, and the record builder, which cuts spans at any line break,
   see the same paragraphs (:func:`normalize_line_endings`);
2. **cuts it into pieces** of at most ``piece_chars`` characters
   (:func:`piece_bounds`): whole paragraphs, grouped in order while they
   fit; a paragraph longer than that is cut after the ends of its
   sentences (``。！？；…`` and the closing quotes after them), and a
   sentence longer than that is cut every ``piece_chars`` characters;
3. **analyses each piece as a document** (the pieces of one document may go
   to different worker processes) and **merges the pieces' record bodies**
   into one record (:func:`merge_bodies`): every offset is shifted by its
   piece's start and mapped back through the line-ending normalisation, so
   it is a character offset into the text the user gave, and ``text`` is
   that text.

The pipeline's memory therefore grows with the longest piece (times the
batch size), not with the document: the pipelines' activations, span
groups and per-token arrays exist for one batch of pieces at a time; what
grows with the document is its text and its record.

What a cut can change. A document of at most ``piece_chars`` characters is
one piece and gets exactly the analysis of the whole text (with ``\\n`` line
endings). In a longer one, nothing links two pieces: the
``cross_paragraph_linker`` (which pairs paragraph-opening sentences at most
``window`` = 8 paragraphs apart) finds no parallelism whose branches lie in
different pieces, and a paragraph cut between sentences loses a
parallelism whose branches straddle the cut, and its sentences near the
cut are encoded without the context beyond it. A sentence cut by the
character bound becomes two sentences.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: Characters per piece. Every PSE-I essay (at most 1,880 characters) is one
#: piece, and a batch of pieces of a long document holds no more text than a
#: batch of essays: the pipeline's memory grows by about 35 KB per character
#: in flight (docs/reliability.md, "Long documents").
PIECE_CHARS = 2_000
#: Where a paragraph longer than a piece may be cut: after a run of these
#: (the clause segmenter's sentence ends, without the ASCII full stop of
#: 3.14) and the closing quotes and brackets that follow them.
_SENTENCE_END = re.compile("[。．？?！!；;…]+[”’」』）)】》〉］\\]}\"']*")
_LINE_ENDING = re.compile("\r\n?")
_NUMBERED = re.compile(r"^(.*_)(\d+)$")


class Normalized:
    """A text with ``\\n`` line endings and the map of its offsets back to
    the text it came from (``original``)."""

    __slots__ = ("text", "original", "_crlf")

    def __init__(self, text: str, original: str, crlf: List[int]) -> None:
        self.text, self.original, self._crlf = text, original, crlf

    def to_original(self, offset: int) -> int:
        """The offset in ``original`` of ``offset`` in ``text`` (a start or
        an end: the ``\\n`` that stands for a ``\\r\\n`` maps to both of its
        characters)."""
        return offset + bisect_left(self._crlf, offset) if self._crlf else offset


def normalize_line_endings(text: str) -> Normalized:
    """``text`` with each ``\\r\\n`` and each lone ``\\r`` replaced by ``\\n``.

    ``\\r\\n`` shortens the text by one character per line; the returned
    :class:`Normalized` maps offsets back (``crlf``: the offsets in the
    normalised text of the ``\\n`` of each former ``\\r\\n``, ascending).
    """
    if "\r" not in text:
        return Normalized(text, text, [])
    crlf: List[int] = []
    removed = 0
    for match in _LINE_ENDING.finditer(text):
        if match.end() - match.start() == 2:
            crlf.append(match.start() - removed)
            removed += 1
    return Normalized(_LINE_ENDING.sub("\n", text), text, crlf)


def piece_bounds(text: str, piece_chars: int = PIECE_CHARS) -> List[Tuple[int, int]]:
    """``[(start, end), ...]``: consecutive pieces covering ``text``, each of
    at most ``piece_chars`` characters (module docstring); ``[(0,
    len(text))]`` when the text fits in one. Raises ValueError for
    ``piece_chars < 1``."""
    if piece_chars < 1:
        raise ValueError(f"piece_chars must be >= 1, got {piece_chars}")
    if len(text) <= piece_chars:
        return [(0, len(text))]
    # candidate cuts, coarsest first: after each line break
    paragraph_ends = [m.end() for m in re.finditer("\n", text)]
    return _group(text, 0, len(text), paragraph_ends, piece_chars, _split_paragraph)


def _group(text: str, start: int, end: int, cuts: Sequence[int], limit: int, split_unit) -> List[Tuple[int, int]]:
    """Units ``[start, cut_1), [cut_1, cut_2), ... [cut_n, end)`` grouped
    greedily in order into pieces of at most ``limit`` characters; a unit
    longer than that is split by ``split_unit(text, start, end, limit)``."""
    units = []
    previous = start
    for cut in cuts:
        if start < cut < end:
            units.append((previous, cut))
            previous = cut
    units.append((previous, end))
    pieces: List[Tuple[int, int]] = []
    open_start: Optional[int] = None
    open_end = start
    for u_start, u_end in units:
        if u_end - u_start > limit:
            if open_start is not None:
                pieces.append((open_start, open_end))
                open_start = None
            pieces.extend(split_unit(text, u_start, u_end, limit))
        elif open_start is not None and u_end - open_start <= limit:
            open_end = u_end
        else:
            if open_start is not None:
                pieces.append((open_start, open_end))
            open_start, open_end = u_start, u_end
    if open_start is not None:
        pieces.append((open_start, open_end))
    return pieces


def _split_paragraph(text: str, start: int, end: int, limit: int) -> List[Tuple[int, int]]:
    cuts = [m.end() for m in _SENTENCE_END.finditer(text, start, end)]
    return _group(text, start, end, cuts, limit, _split_sentence)


def _split_sentence(text: str, start: int, end: int, limit: int) -> List[Tuple[int, int]]:
    return [(i, min(i + limit, end)) for i in range(start, end, limit)]


# --- merging the pieces' records ----------------------------------------------------

#: Keys of a record body that are not lists of spans.
_SCALAR_KEYS = ("text", "n_chars", "n_tokens", "summary")


def merge_bodies(normalized: Normalized, bounds: Sequence[Tuple[int, int]], bodies: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One record body (:func:`spacy_rhetoric.analysis.records.record_body`) for
    ``normalized.original`` from the bodies of its pieces (``bounds`` in
    ``normalized.text``, ``bodies`` in the same order).

    Every dict in a list of the body (sentences, components, clauses,
    parallelisms and their branches, and any list of spans a later version
    adds) that has ``start`` and ``end`` is moved by its piece's start and
    mapped to the original text; its ``text``, if any, is cut from the
    original. Parallelism ids numbered ``name_N`` are renumbered after the
    pieces before them. ``n_tokens`` is summed, ``summary`` recomputed.
    Raises ValueError when ``bounds`` and ``bodies`` differ in length.
    """
    from .records import summarize

    if len(bounds) != len(bodies):
        raise ValueError(f"{len(bounds)} pieces but {len(bodies)} record bodies")
    original = normalized.original
    merged: Dict[str, Any] = {"text": original, "n_chars": len(original),
                              "n_tokens": sum(int(b.get("n_tokens", 0)) for b in bodies)}
    list_keys: List[str] = []
    for body in bodies:
        list_keys.extend(k for k in body if k not in _SCALAR_KEYS and k not in list_keys)
    numbered = 0
    for key in list_keys:
        merged[key] = []
    for (piece_start, _), body in zip(bounds, bodies):
        top = 0
        for key in list_keys:
            for item in body.get(key, []):
                moved = _moved(item, piece_start, normalized)
                if key == "parallelisms" and isinstance(moved, dict) and isinstance(moved.get("id"), str):
                    found = _NUMBERED.match(moved["id"])
                    if found:
                        top = max(top, int(found.group(2)))
                        moved["id"] = f"{found.group(1)}{int(found.group(2)) + numbered}"
                merged[key].append(moved)
        numbered += top
    merged["summary"] = summarize(merged.get("sentences", []), merged.get("components", []),
                                  merged.get("parallelisms", []), len(merged.get("clauses", [])))
    # the order of record_body's keys
    order = [k for k in bodies[0]] if bodies else []
    return {k: merged[k] for k in order if k in merged} | {k: v for k, v in merged.items() if k not in order}


def _moved(item: Any, shift: int, normalized: Normalized) -> Any:
    if isinstance(item, list):
        return [_moved(x, shift, normalized) for x in item]
    if not isinstance(item, dict):
        return item
    out = {k: _moved(v, shift, normalized) if isinstance(v, (list, dict)) else v for k, v in item.items()}
    if isinstance(item.get("start"), int) and isinstance(item.get("end"), int):
        out["start"] = normalized.to_original(item["start"] + shift)
        out["end"] = normalized.to_original(item["end"] + shift)
        if "text" in item:
            out["text"] = normalized.original[out["start"]:out["end"]]
    return out


__all__ = ["PIECE_CHARS", "Normalized", "merge_bodies", "normalize_line_endings", "piece_bounds"]
