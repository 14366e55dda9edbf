"""The evaluation of record: the user's path, scored by character offsets.

A user hands the pipeline raw text; `rhetoric analyze`, `rhetoric serve` and
``nlp(text)`` tokenise it with the pipeline's own tokenizer, cut it into
sentences with the ``clause_segmenter`` and label each sentence. This package
runs exactly that path (``nlp.pipe`` on the text, then
:func:`spacy_rhetoric.analysis.records.doc_to_record`, the analysis/v1 record the
user gets) and scores the record against gold annotation by **character
offsets**, so the tokenisation and the sentence units are the pipeline's own.

Gold (:class:`GoldDoc`) is read from the corpora as text:

- ``pse-i-cerd``: the team's annotation of the PSE-I essays
  (``annotations/pse-i-cerd/*.jsonl``); each essay's paragraphs are joined by
  ``"\n"`` as ``analyze`` reads a PSE-I XML file; sentence labels at the
  three levels and components, each record one gold unit (a PSE-I ``<sent>``);
- ``pse-i``: the same essays' parallelisms (PSE-I word-level branches) and,
  at the sentence level, ``parallelism`` for a ``<sent>`` holding a branch
  (PSE-I's definition: two or more branches);
- ``simile``: one sentence per text, ``metaphor``/``simile`` or literal, tenor
  and vehicle spans;
- ``cmc``: one sentence per text, the held-out split of
  :func:`spacy_rhetoric.corpora.cmc.make_split`; gold 1 is "metaphor or
  personification", so predictions of either count as the one label
  ``figurative``;
- ``hypo-cn``: HYPO-cn's valid split (its test split is held out upstream),
  one sentence per text, hyperbole or not; besides P/R/F1, the sentence
  accuracy (:func:`score_accuracy`), the figure Kong et al. 2020 report;
- ``configure``: the passages of ConFiguRe's validation split in the dev
  part of ``configs/configure_split.json`` (split by work, never trained
  on), scored for the four CERD devices by :func:`score_figures`.

How a gold unit gets its prediction when units differ
(:func:`assign_sentences`): every predicted sentence is given to the gold unit
it overlaps by the most characters (the earlier one on a tie); a gold unit's
labels at a level are the union of its predicted sentences' non-literal
labels, or ``literal`` when it has none. A predicted sentence is thus counted
once, and a gold unit split into several predicted sentences gets all of
their devices.

Headings: a gold unit that is the only unit of its paragraph and ends in no
sentence punctuation (a one-line title) is a heading; sentence scores are
reported for all units, for body units and for headings apart.

Components: strict (same label, same start and end character) and overlap
(a predicted span is correct when it overlaps a gold span of its label; a
gold span is found when a predicted span of its label overlaps it).

Parallelisms: each predicted branch is mapped to the gold words it overlaps
by at least one character (a branch becomes the run from its first to its
last such word), then EPM/MPBM/MBAWO/MWO are computed on gold word offsets
with :func:`spacy_rhetoric.scorers.parallelism.score_groups` (Bothwell et al.
2023, §5 and Appendix B), as the gold-word figures are.

``gold_units=True`` runs the same scoring on the gold words and gold sentence
units instead of raw text (each PSE-I paragraph as its own Doc with the
``<sent>`` starts, each simile sentence on its gold words, each CMC text as
one sentence): the upper bound the earlier figures measured.
"""
from __future__ import annotations

from .gold import (
    CONFIGURE_DEVICES,
    CONFIGURE_SPLIT,
    CORPORA,
    FIGURATIVE,
    FIXED_SPLITS,
    GoldDoc,
    GoldUnit,
    SENTENCE_END,
    read_cmc_gold,
    read_cmre_gold,
    read_cmre_relation_gold,
    read_configure_gold,
    read_gold,
    read_hypo_cn_gold,
    read_pse_i,
    read_pse_i_cerd,
    read_pse_original,
    read_simile_gold,
)
from .report import (
    evaluate_raw,
    headline_rows,
)
from .scoring import (
    align_records,
    assign_sentences,
    branch_to_words,
    coarse_counts,
    consistency,
    cross_only_units,
    device_counts,
    figure_match,
    gold_counts,
    predict_gold_units,
    predict_raw,
    predicted_unit_labels,
    score_accuracy,
    score_components,
    score_cross_paragraph,
    score_figures,
    score_parallelism,
    score_records,
    score_sentences,
    score_unit_devices,
    score_units,
)
from .tuning import (
    O_BIAS_GRID,
    nearest_half,
    tune_component_thresholds_raw,
    tune_linker_bias_raw,
    tune_thresholds_raw,
)

__all__ = [
    "CONFIGURE_DEVICES",
    "CONFIGURE_SPLIT",
    "CORPORA",
    "FIGURATIVE",
    "FIXED_SPLITS",
    "GoldDoc",
    "GoldUnit",
    "O_BIAS_GRID",
    "SENTENCE_END",
    "align_records",
    "assign_sentences",
    "branch_to_words",
    "coarse_counts",
    "consistency",
    "cross_only_units",
    "device_counts",
    "evaluate_raw",
    "figure_match",
    "gold_counts",
    "headline_rows",
    "nearest_half",
    "predict_gold_units",
    "predict_raw",
    "predicted_unit_labels",
    "read_cmc_gold",
    "read_cmre_gold",
    "read_cmre_relation_gold",
    "read_configure_gold",
    "read_gold",
    "read_hypo_cn_gold",
    "read_pse_i",
    "read_pse_i_cerd",
    "read_pse_original",
    "read_simile_gold",
    "score_accuracy",
    "score_components",
    "score_cross_paragraph",
    "score_figures",
    "score_parallelism",
    "score_records",
    "score_sentences",
    "score_unit_devices",
    "score_units",
    "tune_component_thresholds_raw",
    "tune_linker_bias_raw",
    "tune_thresholds_raw",
]
