"""Reading and writing for ``analyze``: inputs, encodings, document ids,
crash-safe JSONL and HTML output, ``--resume``.

Inputs
    ``.txt`` files, PSE-I ``.xml`` essays (their words joined, one line per
    paragraph), folders (their ``*.txt`` and ``*.xml`` files, recursively,
    sorted), ``-`` for standard input (one document). A PSE-I folder (with
    ``splits.json``) can be restricted to one split. A file reached twice
    (the same resolved path) is read once. A subfolder that cannot be
    listed (no permission) is an input of its own whose record is a
    ``read_error``, never skipped in silence.

Encodings (``.txt`` files and standard input; :func:`decode_text`)
    ``auto``: a byte-order mark decides first (UTF-8, UTF-16, UTF-32); bytes
    without one that contain a NUL are not text; valid UTF-8 is UTF-8 (a
    strict decode, not a guess); anything else goes to charset-normalizer,
    whose choice is taken only among the legacy encodings of Chinese text:
    GB18030 (which covers GBK and GB2312) when its mess is within 0.1 of the
    best candidate's (short GBK texts otherwise come out as cp949), else
    Big5 (big5, big5hkscs, cp950) when that is the best. Any other guess
    (cp1125 for UTF-8 with one Latin-1 byte, cp1252 for Latin-1 text) is
    refused rather than risk garbage, and so is data no encoding fits: the
    file is reported as not text, never decoded into garbage and analysed.
    Texts of a few characters are ambiguous between CJK encodings (Japanese
    Shift-JIS of 10 characters also decodes as GB18030): force those with
    ``--encoding``. BOM-less UTF-16/32 is never guessed (use ``--encoding
    utf-16-le``). A
    named encoding is used strictly (an undecodable byte is an error naming
    the line); forcing ``utf-8`` on a file with a UTF-8 BOM drops the BOM
    (``utf-8-sig``). PSE-I XML declares its own encoding (record field
    ``encoding`` is null); standard input read as text (an ``io.StringIO``
    in library use) has none either.

Document ids
    The file stem (``12`` for ``xml/12.xml``), ``-`` for standard input.
    When two inputs share a stem, each of them is named instead by its path
    inside the folder argument it was found in (``a/1.txt``; a file argument
    by its name with suffix), and if that is still shared, by its path as
    given on the command line (``corpus1/a/1.txt``), ``/``-separated. Ids
    therefore depend only on the list of inputs: ``--resume`` must be given
    the same inputs as the interrupted run.

Output
    An output file that is one of the inputs (the same file, or a symbolic
    or hard link to it) is refused before anything is written
    (:func:`refuse_input_as_output`). JSONL is appended one whole line per ``write`` system call on an
    unbuffered file, ``fsync``-ed every ``fsync_every`` records and at the
    end, so an interrupted run leaves whole lines, except perhaps one
    partial last line that :func:`scan_jsonl` finds and ``--resume``
    truncates. What an interruption loses is the work in flight: the
    current batch (``--batch-size`` documents) of the local engine, the
    batches the Ray actors are analysing. HTML is written to a temporary file beside the target,
    ``fsync``-ed and renamed over it: a crash leaves the old file or none.
"""
from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

INPUT_SUFFIXES = (".txt", ".xml")
#: charset-normalizer candidates whose mess exceeds the best one's by at
#: most this much can still be preferred (GB18030 over cp949 & co.).
GB_PREFERENCE_TOLERANCE = 0.1
_GB_FAMILY = {"gb18030", "gbk", "gb2312"}
_BIG5_FAMILY = {"big5", "big5hkscs", "cp950"}
_BOMS = (  # longest first: the UTF-32-LE BOM starts with the UTF-16-LE one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

#: Error types of error records (``{"error": {"type": ..., "message": ...}}``).
ERROR_TYPES = ("not_text", "decode_error", "format_error", "read_error", "too_long", "analysis_error")


class DocumentError(ValueError):
    """One document cannot be read or analysed; ``type`` is one of
    :data:`ERROR_TYPES`, the message names the file (and line where known)."""

    def __init__(self, type: str, message: str) -> None:
        self.type = type
        super().__init__(message)


@dataclass
class InputDoc:
    """One document to analyse: ``id`` (see module docstring), its path
    (None for stdin), its text, the encoding it was decoded with (None for
    XML and text-mode stdin) and, when it could not be read, ``error``
    (``{"type", "message"}``; ``text`` is then empty)."""

    id: str
    path: Optional[str]
    text: str
    encoding: Optional[str] = None
    error: Optional[Dict[str, str]] = None


# --- encodings ------------------------------------------------------------------


def check_encoding(name: str) -> str:
    """``auto`` or the canonical codec name of ``name``; ValueError when
    Python has no such codec."""
    if name.lower() == "auto":
        return "auto"
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise ValueError(f"unknown encoding {name!r} (use auto or a Python codec name such as gb18030, utf-16)") from None


def _line_of(data: bytes, offset: int, unit: bytes = b"\n") -> int:
    return data[:offset].count(unit) + 1


def decode_text(data: bytes, encoding: str = "auto", name: str = "<bytes>") -> Tuple[str, str]:
    """``(text, codec)`` of ``data`` (rules in the module docstring).

    Raises DocumentError ``not_text`` (NUL bytes, or no encoding fits) or
    ``decode_error`` (a named encoding does not decode ``data``).
    """
    encoding = check_encoding(encoding)
    if encoding != "auto":
        if encoding == "utf-8" and data.startswith(codecs.BOM_UTF8):
            encoding = "utf-8-sig"
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as err:
            line = _line_of(data, err.start)
            raise DocumentError("decode_error", f"{name}, line {line}: not {encoding} text ({err.reason})") from None
        if "\x00" in text:
            raise DocumentError("not_text", f"{name}: not text (NUL characters after decoding as {encoding})")
        return text, encoding
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), codec
            except UnicodeDecodeError as err:
                raise DocumentError("decode_error", f"{name}: starts with a {codec} byte-order mark but is not {codec} "
                                    f"text at byte {err.start} ({err.reason})") from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DocumentError("not_text", f"{name}: not text (NUL byte at offset {nul}, line {_line_of(data, nul)}; "
                            "a UTF-16 file needs a byte-order mark or --encoding utf-16-le/utf-16-be)")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as err:
        utf8_error = f"not UTF-8 from line {_line_of(data, err.start)}: {err.reason}"
    codec, note = _detect(data)
    if codec is None:
        raise DocumentError("not_text", f"{name}: not text: {note} ({utf8_error}); pass --encoding NAME to force one")
    return data.decode(codec), codec


def _detect(data: bytes) -> Tuple[Optional[str], str]:
    """``(codec, note)``: charset-normalizer's choice for ``data`` (no BOM,
    no NUL, not UTF-8) among the encodings of Chinese text, GB18030
    preferred within :data:`GB_PREFERENCE_TOLERANCE`; codec None (and a
    note on what charset-normalizer saw) when none fits."""
    from charset_normalizer import from_bytes

    matches = [m for m in from_bytes(data) if not m.encoding.startswith(("utf_16", "utf_32"))]
    if not matches:
        return None, "no encoding fits"
    best = min(m.chaos for m in matches)
    if any(m.encoding in _GB_FAMILY and m.chaos <= best + GB_PREFERENCE_TOLERANCE for m in matches):
        return "gb18030", ""
    match = min(matches, key=lambda m: (m.chaos, -m.coherence))
    codec = codecs.lookup(match.encoding).name
    if codec in _BIG5_FAMILY:
        return codec, ""
    language = f", {match.language}" if match.language and match.language != "Unknown" else ""
    return None, f"no encoding of Chinese text fits; the closest guess is {codec}{language}"


def read_text_file(path: Union[str, Path], encoding: str = "auto") -> str:
    """Text of ``path`` (see :func:`read_text`)."""
    return read_text(Path(path), encoding)[0]


def read_text(path: Path, encoding: str = "auto") -> Tuple[str, str]:
    """``(text, codec)`` of a text file; DocumentError naming the file."""
    return decode_text(path.read_bytes(), encoding, str(path))


# --- PSE-I XML ------------------------------------------------------------------


def read_pse_essay(path: Path) -> str:
    """Text of a PSE-I XML essay: each paragraph's words joined, paragraphs
    separated by ``\\n``. Raises CorpusFormatError naming file and line."""
    from ..corpora.pse_i import essay_text

    return essay_text(path)


# --- inputs and ids -----------------------------------------------------------


class UnreadableFolder:
    """A folder below a folder argument that could not be listed
    (``os.walk``'s error, e.g. no read permission): an input of its own,
    whose reading raises that error, so that it gets a ``read_error``
    record instead of being skipped. ``str()`` is its path."""

    __slots__ = ("path", "error")

    def __init__(self, path: Path, error: OSError) -> None:
        self.path, self.error = path, error

    @property
    def stem(self) -> str:
        return self.path.name

    def relative_to(self, other: Path) -> Path:
        return self.path.relative_to(other)

    def as_posix(self) -> str:
        return self.path.as_posix()

    def resolve(self) -> Path:
        return self.path.resolve()

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"UnreadableFolder({str(self.path)!r})"


def _folder_files(folder: Path, split: Optional[str]) -> List[Path]:
    if split is not None:
        from ..corpora.pse_i import read_splits

        if not (folder / "splits.json").is_file():
            raise ValueError(f"--split {split} needs a PSE-I folder with splits.json, got {folder}")
        splits = read_splits(folder)
        if split not in splits:
            raise ValueError(f"unknown split {split!r}; {folder / 'splits.json'} has {sorted(splits)}")
        return [folder / "xml" / name for name in splits[split]]
    found: List[Union[Path, UnreadableFolder]] = []

    def unreadable(err: OSError) -> None:
        found.append(UnreadableFolder(Path(err.filename) if err.filename else folder, err))

    for root, _, names in os.walk(folder, onerror=unreadable):
        found.extend(Path(root) / name for name in names
                     if Path(name).suffix.lower() in INPUT_SUFFIXES and (Path(root) / name).is_file())
    return sorted(found, key=lambda f: f.path if isinstance(f, UnreadableFolder) else f)


def expand_inputs(paths: Sequence[Union[str, Path]], split: Optional[str] = None) -> List[Tuple[str, Union[Path, str]]]:
    """``(id, file)`` of every input, in order: folders expanded, ``"-"``
    kept for stdin, a file reached twice kept once, ids unique (module
    docstring).

    Raises FileNotFoundError for a missing path, ValueError for a file that
    is not ``.txt``/``.xml`` or a bad ``split``.
    """
    found: List[Tuple[Union[Path, str], List[str]]] = []  # (file, id candidates, most specific last)
    seen: Set[Any] = set()
    for raw in paths:
        if str(raw) == "-":
            if "-" not in seen:
                seen.add("-")
                found.append(("-", ["-"]))
            continue
        path = Path(raw)
        if path.is_dir():
            files = [(f, f.relative_to(path).as_posix()) for f in _folder_files(path, split)]
        elif path.is_file():
            if path.suffix.lower() not in INPUT_SUFFIXES:
                raise ValueError(f"{path}: unsupported input (expected .txt or .xml)")
            files = [(path, path.name)]
        else:
            raise FileNotFoundError(f"input not found: {path}")
        for file, rel in files:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                found.append((file, [file.stem, rel, file.as_posix()]))
    return list(zip(_unique_ids([c for _, c in found]), (f for f, _ in found)))


def refuse_input_as_output(output: Union[str, Path, IO[str]], inputs: Sequence[Tuple[str, Any]]) -> None:
    """ValueError when the file ``output`` is one of the ``inputs`` (from
    :func:`expand_inputs`): the same path, or a symbolic or hard link to
    it (``os.path.samefile``: the same device and inode). Called before
    anything is written, so the input is left as it was. An open file,
    ``"-"`` and an output that does not exist yet pass."""
    if hasattr(output, "write") or str(output) == "-" or not os.path.exists(output):
        return
    for _, source in inputs:
        if isinstance(source, UnreadableFolder) or str(source) == "-":
            continue
        try:
            same = os.path.samefile(output, source)
        except OSError:
            continue
        if same:
            raise ValueError(f"the output {output} is the input {source}; writing it would destroy the input: "
                             "choose another --output")


def _unique_ids(candidates: List[List[str]]) -> List[str]:
    """The first candidate of each input that no other input has at the
    same level; ``#2``, ``#3``, ... for what is still shared."""
    from collections import Counter

    depth = max((len(c) for c in candidates), default=0)
    counts = [Counter(c[min(level, len(c) - 1)] for c in candidates) for level in range(depth)]
    ids = []
    for cand in candidates:
        level = next((lv for lv in range(len(cand)) if counts[lv][cand[lv]] == 1), len(cand) - 1)
        ids.append(cand[level])
    taken: Counter = Counter()
    unique = []
    for doc_id in ids:
        taken[doc_id] += 1
        unique.append(doc_id if taken[doc_id] == 1 else f"{doc_id}#{taken[doc_id]}")
    return unique


def expand_paths(paths: Sequence[Union[str, Path]], split: Optional[str] = None) -> List[Union[Path, str]]:
    """The files of :func:`expand_inputs`, without their ids."""
    return [file for _, file in expand_inputs(paths, split)]


def read_input(doc_id: str, source: Union[Path, str], *, encoding: str = "auto", stdin: Optional[IO] = None) -> InputDoc:
    """Read one input. Raises DocumentError (not text, decoding),
    CorpusFormatError (XML) or OSError (reading)."""
    if source == "-":
        stream = stdin if stdin is not None else sys.stdin
        buffer = getattr(stream, "buffer", None)
        if buffer is None:  # a text stream (io.StringIO): already decoded
            return InputDoc(doc_id, None, stream.read(), None)
        text, codec = decode_text(buffer.read(), encoding, "<stdin>")
        return InputDoc(doc_id, None, text, codec)
    if isinstance(source, UnreadableFolder):
        raise source.error
    path = Path(source)
    if path.suffix.lower() == ".xml":
        return InputDoc(doc_id, str(path), read_pse_essay(path), None)
    text, codec = read_text(path, encoding)
    return InputDoc(doc_id, str(path), text, codec)


def error_of(err: BaseException) -> Dict[str, str]:
    """``{"type", "message"}`` of a reading error."""
    from ..errors import CorpusFormatError

    if isinstance(err, DocumentError):
        return {"type": err.type, "message": str(err)}
    if isinstance(err, CorpusFormatError):
        return {"type": "format_error", "message": str(err)}
    if isinstance(err, OSError):
        where = f"{err.filename}: " if err.filename else ""
        what = "folder cannot be listed: " if os.path.isdir(err.filename or "") else ""
        return {"type": "read_error", "message": f"{where}{what}{err.strerror or err}"}
    return {"type": "read_error", "message": f"{type(err).__name__}: {err}"}


def iter_inputs(
    paths: Sequence[Union[str, Path]],
    split: Optional[str] = None,
    stdin: Optional[IO] = None,
    *,
    encoding: str = "auto",
    errors: str = "raise",
    inputs: Optional[Sequence[Tuple[str, Union[Path, str]]]] = None,
) -> Iterator[InputDoc]:
    """The documents of ``paths`` (module docstring), read lazily.

    ``errors="raise"``: a document that cannot be read raises (DocumentError,
    CorpusFormatError, OSError); ``"record"``: it is yielded with ``error``
    set and empty text. ``inputs`` (from :func:`expand_inputs`) replaces
    ``paths``/``split``.
    """
    if errors not in ("raise", "record"):
        raise ValueError(f"errors must be raise or record, got {errors!r}")
    encoding = check_encoding(encoding)
    for doc_id, source in inputs if inputs is not None else expand_inputs(paths, split):
        try:
            yield read_input(doc_id, source, encoding=encoding, stdin=stdin)
        except Exception as err:  # noqa: BLE001 - every failure becomes the document's error record
            if errors == "raise":
                raise
            yield InputDoc(doc_id, None if source == "-" else str(source), "", None, error_of(err))


# --- messages -------------------------------------------------------------------------

#: Characters that move the cursor, end a line, or reorder what a terminal
#: shows: C0 and C1 controls, DEL, the Unicode line and paragraph separators
#: and the bidirectional embeddings, overrides and isolates.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` safe to print on one terminal line: each character of
    :data:`_UNPRINTABLE` (controls, line breaks, escape sequences, bidi
    overrides) replaced by its Python escape (``\\x1b``, ``\\n``,
    ``\\u202e``), everything else kept, so a file name cannot forge a line
    or recolour the terminal."""
    return _UNPRINTABLE.sub(lambda m: _escape(m.group()), text)


def _escape(char: str) -> str:
    escaped = repr(char)[1:-1]
    return escaped if escaped != char else f"\\u{ord(char):04x}"


# --- JSONL output and --resume -----------------------------------------------------


@dataclass
class JsonlState:
    """What an existing JSONL output holds: ids with a record (``ok`` and
    ``failed``), the models of its analysis records, and the byte length of
    its whole lines (``valid_bytes``; less than ``size`` when the last line
    is partial)."""

    ok: Set[str]
    failed: Set[str]
    models: Set[Tuple[str, str]]
    valid_bytes: int
    size: int

    @property
    def done(self) -> Set[str]:
        return self.ok | self.failed


def scan_jsonl(path: Union[str, Path]) -> JsonlState:
    """Read an analysis JSONL file for ``--resume``. A last line without
    its newline is partial (a run was interrupted while writing it) and is
    not counted. Raises ValueError naming the line of a whole line that is
    not a record."""
    path = Path(path)
    state = JsonlState(set(), set(), set(), 0, 0)
    if not path.exists():
        return state
    data = path.read_bytes()
    state.size = len(data)
    end = data.rfind(b"\n") + 1  # 0 when there is no whole line
    state.valid_bytes = end
    for number, line in enumerate(data[:end].split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            doc_id = record["id"]
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{path}, line {number}: not an analysis record; cannot resume "
                             "(remove the line or write to a new file)") from None
        if "error" in record:
            state.failed.add(doc_id)
        else:
            state.ok.add(doc_id)
            model = record.get("model") or {}
            state.models.add((str(model.get("name", "")), str(model.get("version", ""))))
    return state


class JsonlWriter:
    """Appends records to a JSONL file as whole lines (module docstring);
    ``"-"`` writes to stdout (flushed per line). ``truncate_to`` cuts the
    file to that many bytes first (``--resume`` dropping a partial line);
    ``fresh`` starts an empty file."""

    def __init__(self, output: Union[str, Path, IO[str]], *, fresh: bool = True, truncate_to: Optional[int] = None,
                 fsync_every: int = 8) -> None:
        self.count, self.fsync_every = 0, max(1, fsync_every)
        self.fd: Optional[int] = None
        self.stream: Optional[IO[str]] = None
        if hasattr(output, "write"):
            self.stream = output  # type: ignore[assignment]
        elif str(output) == "-":
            self.stream = sys.stdout
        else:
            path = Path(output)
            path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if fresh else 0)
            self.fd = os.open(path, flags, 0o666)
            if truncate_to is not None and not fresh:
                os.ftruncate(self.fd, truncate_to)
                os.fsync(self.fd)

    def write(self, record: Dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if self.fd is None:
            assert self.stream is not None
            self.stream.write(line)
            self.stream.flush()
        else:
            data = memoryview(line.encode("utf8"))
            while data:
                data = data[os.write(self.fd, data):]
            self.count += 1
            if self.count % self.fsync_every == 0:
                os.fsync(self.fd)

    def close(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- whole-file output (HTML) -------------------------------------------------------


def write_atomic(output: Union[str, Path, IO[str]], text: str) -> None:
    """Write ``text`` to ``output`` (a path, ``"-"`` or an open file); a
    path is written to a temporary file beside it, fsync-ed and renamed
    over it, so it is either the old file (or absent) or the whole new one."""
    if hasattr(output, "write"):
        output.write(text)  # type: ignore[union-attr]
        return
    if str(output) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


__all__ = ["DocumentError", "ERROR_TYPES", "InputDoc", "JsonlState", "JsonlWriter", "UnreadableFolder", "check_encoding",
           "decode_text", "error_of", "expand_inputs", "expand_paths", "iter_inputs", "printable", "read_input",
           "read_pse_essay", "read_text", "read_text_file", "refuse_input_as_output", "scan_jsonl", "write_atomic"]
