"""JSON and JSONL input with errors that name the file and the line."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator, List, Tuple, Union

from ..errors import CorpusFormatError


def load_json_list(path: Union[str, Path], what: str = "records") -> List:
    """The JSON list in ``path``. Raises :class:`CorpusFormatError` naming the
    file and line for invalid JSON, or the file when the top level is no list."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise CorpusFormatError(path, f"invalid JSON: {err.msg}", line=err.lineno) from None
    if not isinstance(data, list):
        raise CorpusFormatError(path, f"expected a JSON list of {what}")
    return data


def iter_jsonl_objects(path: Union[str, Path]) -> Iterator[Tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file.
    Raises :class:`CorpusFormatError` naming the file and line for invalid
    JSON or a line that is not a JSON object."""
    path = Path(path)
    with path.open(encoding="utf8") as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise CorpusFormatError(path, f"invalid JSON: {err.msg}", line=line_no) from None
            if not isinstance(obj, dict):
                raise CorpusFormatError(path, "expected a JSON object", line=line_no)
            yield line_no, obj


def text_sha1(text: str) -> str:
    """The first 12 hex digits of the SHA-1 of ``text`` in UTF-8: ties an
    annotation record to a sentence of a corpus whose text we may not copy."""
    return hashlib.sha1(text.encode("utf8")).hexdigest()[:12]
