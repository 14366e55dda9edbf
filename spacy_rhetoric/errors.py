"""Errors raised by spacy-rhetoric."""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union


class CorpusFormatError(ValueError):
    """A corpus file does not have the documented format.

    The message always names the file and, where known, the line (1-based) or
    the record index (0-based) that is malformed.
    """

    def __init__(
        self,
        path: Union[str, Path],
        message: str,
        *,
        line: Optional[int] = None,
        record: Optional[int] = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.record = record
        where = self.path
        if line is not None:
            where += f", line {line}"
        if record is not None:
            where += f", record {record}"
        super().__init__(f"{where}: {message}")
