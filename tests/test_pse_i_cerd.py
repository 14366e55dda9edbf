"""The team-annotated corpus (annotations/pse-i-cerd): its converter on the
real records, malformed records named by file and line, and the agreement
figures' arithmetic."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import spacy

from spacy_rhetoric.annotation import COMPONENTS_KEY, annotated_labels
from spacy_rhetoric.corpora.pse_i_cerd import read_annotated, read_records
from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.research.annotation_agreement import annotation_agreement

ROOT = Path(__file__).resolve().parents[1]
ANNOTATIONS = ROOT / "annotations" / "pse-i-cerd"


def _records(split: str):
    path = ANNOTATIONS / f"{split}.jsonl"
    if not path.is_file():
        pytest.skip(f"{path.relative_to(ROOT)} is not in this checkout yet")
    return [rec for _, rec in read_records(path)]


@pytest.mark.parametrize("split", ["train", "test"])
def test_corpus_records_are_valid_and_cover_whole_essays(split: str, pse_dir: Path):
    records = _records(split)
    essays = {r["essay"] for r in records}
    splits = json.loads((pse_dir / "splits.json").read_text())
    source = {"train": "training", "test": "test"}[split]
    assert {f"{e}.xml" for e in essays} <= set(splits[source])
    if split == "test":
        assert len(essays) == 42 and len(records) == 1186
    else:
        assert len(records) >= 3000


def test_converter_on_real_records(pse_dir: Path, tmp_path: Path):
    records = [r for r in _records("test") if r["essay"] == "328"]
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf8")
    stats: Counter = Counter()
    docs = read_annotated(path, pse_dir, spacy.blank("zh").vocab, stats)
    assert stats["sentences"] == len(records)
    sents = [s for d in docs for s in d.sents]
    assert [s.text for s in sents] == [r["text"] for r in records]
    for doc in docs:
        assert doc.user_data["corpus"] == "pse-i-cerd"
        assert annotated_labels(doc) >= {"coarse/metaphor", "coarse/personification", "coarse/hyperbole", "coarse/literal", "form/verb", "content/gradation"}
    # every sentence label and component of the records is in the docs
    n_components = sum(len(r["components"]) for r in records)
    assert sum(len(d.spans[COMPONENTS_KEY]) for d in docs) == n_components
    labelled = sum(len([c for c in r["coarse"] if c != "literal"]) for r in records)
    assert sum(len(d.spans["rhetoric"]) for d in docs) == labelled


def test_malformed_records_name_file_and_line(tmp_path: Path):
    good = {"essay": "1", "para": 0, "sent": 0, "text": "风儿在唱歌", "coarse": ["personification"],
            "form": ["verb"], "content": ["personification"],
            "components": [{"label": "personification_object", "start": 0, "end": 2, "text": "风儿"}]}
    cases = [
        ("not json", r"bad\.jsonl, line 2: invalid JSON"),
        (json.dumps({**good, "form": ["simile"]}), r"bad\.jsonl, line 2: .*coarse parent"),
        (json.dumps({**good, "components": [{"label": "tenor", "start": 3, "end": 9}]}), r"bad\.jsonl, line 2: .*outside"),
        (json.dumps({**good, "coarse": ["literal", "metaphor"]}), r"bad\.jsonl, line 2: 'literal' together"),
    ]
    for line, pattern in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps(good, ensure_ascii=False) + "\n" + line + "\n", encoding="utf8")
        with pytest.raises(CorpusFormatError, match=pattern):
            list(read_records(path))


def test_agreement_hand_computed(tmp_path: Path):
    def rec(i, coarse):
        return {"essay": "1", "para": 0, "sent": i, "text": f"s{i}", "coarse": coarse,
                "form": ["literal"] if coarse == ["literal"] else [], "content": [], "components": []}
    a = [rec(0, ["metaphor"]), rec(1, ["metaphor"]), rec(2, ["literal"]), rec(3, ["literal"])]
    b = [rec(0, ["metaphor"]), rec(1, ["literal"]), rec(2, ["literal"]), rec(3, ["literal"])]
    for name, recs in (("a", a), ("b", b)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    result = annotation_agreement(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    # metaphor: observed 3/4; chance 2/4*1/4 + 2/4*3/4 = 1/2 -> kappa 1/2
    assert result["coarse"]["labels"]["metaphor"]["kappa"] == pytest.approx(0.5)
    assert result["coarse_exact_match"] == 0.75
    assert result["coarse"]["labels"]["hyperbole"]["kappa"] is None
