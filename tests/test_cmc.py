"""CMC (Chinese Metaphor Corpus) converter, held-out split and metaphor-detection
counting. Real-data tests read a temporary copy of the first lines of
``../shared/data/cmc/train.tsv`` and skip without it."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Span

from spacy_rhetoric.annotation import ANNOTATED_KEY, DISJUNCTIONS_KEY, annotated_labels
from spacy_rhetoric.corpora.cmc import (
    CmcSentence,
    convert_cmc,
    default_pkuseg_model,
    has_comparator,
    make_split,
    read_cmc,
)
from spacy_rhetoric.corpora.docbin import read_docbin
from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.research.cmc import evaluate_cmc, prf, score_cmc
from spacy_rhetoric.tokenizer.chinese import make_nlp

from rhetoric_helpers import write_annotation_dir

N_REAL = 200


@pytest.fixture(scope="module")
def nlp():
    return make_nlp(default_pkuseg_model())


@pytest.fixture()
def real_sample(shared_data: Path, tmp_path: Path) -> Path:
    """A folder holding train.tsv = the first N_REAL lines of the real file
    (in tmp_path, never in the repository)."""
    src = shared_data / "cmc" / "train.tsv"
    if not src.is_file():
        pytest.skip(f"{src} not found")
    with src.open(encoding="utf8") as fh:
        lines = [next(fh) for _ in range(N_REAL)]
    folder = tmp_path / "cmc"
    folder.mkdir()
    (folder / "train.tsv").write_text("".join(lines), encoding="utf8")
    return folder


def write_tsv(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "cmc"
    folder.mkdir(exist_ok=True)
    (folder / "train.tsv").write_text(text, encoding="utf8")
    return folder


# --- converter on real lines -----------------------------------------------------


def test_convert_real_sample(real_sample: Path, tmp_path: Path, nlp):
    out = tmp_path / "out"
    result = convert_cmc(real_sample, out, nlp, segmentation="test")
    sents = list(read_cmc(real_sample / "train.tsv"))
    assert len(sents) == N_REAL and result["lines"] == N_REAL and result["skipped"] == []
    record = json.loads((out / "split.json").read_text(encoding="utf8"))
    assert record["segmentation"] == "test" and record["seed"] == 0
    by_line = {s.line: s for s in sents}
    seen = []
    for name in ("train", "dev", "test"):
        docs = list(read_docbin(out / f"{name}.spacy", nlp.vocab))
        assert [d.user_data["line"] for d in docs] == record["splits"][name]
        assert result["splits"][name]["sentences"] == len(docs)
        assert result["splits"][name]["positives"] == sum(d.user_data["cmc_label"] for d in docs)
        for doc in docs:
            sent = by_line[doc.user_data["line"]]
            assert doc.text == sent.text and doc.user_data["cmc_label"] == sent.label
            assert doc.user_data["corpus"] == "cmc"
            assert len(list(doc.sents)) == 1
            assert not any(len(group) for group in doc.spans.values())
            assert not doc.cats
        seen.extend(record["splits"][name])
    assert sorted(seen) == list(range(1, N_REAL + 1))
    # the real file's first lines: 1 = metaphorical (personification included), 0 = literal
    assert by_line[1].label == 1 and by_line[3].label == 0
    assert by_line[5].label == 1 and "石榴娃娃" in by_line[5].text


def _lists(value):
    """DocBin user data comes back with tuples for lists."""
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_lists(v) for v in value]
    return value


def test_user_data_per_label(real_sample: Path, tmp_path: Path, nlp):
    convert_cmc(real_sample, tmp_path / "out", nlp)
    docs = [d for name in ("train", "dev", "test") for d in read_docbin(tmp_path / "out" / f"{name}.spacy", nlp.vocab)]
    labels = Counter(d.user_data["cmc_label"] for d in docs)
    assert labels[0] and labels[1]
    for doc in docs:
        if doc.user_data["cmc_label"] == 1:
            assert _lists(doc.user_data[ANNOTATED_KEY]) == {"coarse": ["literal"], "form": [], "content": [], "components": []}
            assert _lists(doc.user_data[DISJUNCTIONS_KEY]) == [["coarse/metaphor", "coarse/personification"]]
            assert annotated_labels(doc) == {"coarse/literal"}
        else:
            assert _lists(doc.user_data[ANNOTATED_KEY]) == {
                "coarse": ["metaphor", "personification"], "form": [], "content": [], "components": []}
            assert DISJUNCTIONS_KEY not in doc.user_data
            assert annotated_labels(doc) == {"coarse/metaphor", "coarse/personification"}


def test_cli_convert_real_sample(real_sample: Path, tmp_path: Path):
    from typer.testing import CliRunner

    from spacy_rhetoric.cli import app

    out = tmp_path / "cli"
    res = CliRunner().invoke(app, ["convert", "cmc", str(real_sample), str(out)])
    assert res.exit_code == 0, res.output
    assert "segmentation:" in res.output and "with_xiang" in res.output
    assert all((out / f"{n}.spacy").is_file() for n in ("train", "dev", "test"))
    assert (out / "split.json").is_file()


# --- split ---------------------------------------------------------------------


def test_split_is_deterministic_and_order_free(real_sample: Path):
    sents = list(read_cmc(real_sample / "train.tsv"))
    first = make_split(sents, seed=0)
    assert make_split(sents, seed=0) == first
    assert make_split(list(reversed(sents)), seed=0) == first
    assert make_split(sents, seed=1) != first


def test_split_json_is_reproducible(real_sample: Path, tmp_path: Path):
    nlp = spacy.blank("zh")
    convert_cmc(real_sample, tmp_path / "a", nlp)
    convert_cmc(real_sample, tmp_path / "b", nlp)
    assert (tmp_path / "a" / "split.json").read_bytes() == (tmp_path / "b" / "split.json").read_bytes()


def test_split_is_stratified_and_keeps_copies_together(real_sample: Path):
    sents = list(read_cmc(real_sample / "train.tsv"))
    split = make_split(sents)
    where = {line: name for name, lines in split.items() for line in lines}
    assert sorted(where) == sorted(s.line for s in sents)
    # identical texts never cross splits
    texts = defaultdict(set)
    for s in sents:
        texts[s.text].add(where[s.line])
    assert all(len(v) == 1 for v in texts.values())
    # each (label, 像/象) stratum: dev and test within the largest group of 10 %
    largest = max(Counter(s.text for s in sents).values())
    strata = defaultdict(Counter)
    for s in sents:
        strata[(s.label, has_comparator(s.text))][where[s.line]] += 1
    for key, counts in strata.items():
        n = sum(counts.values())
        for name in ("dev", "test"):
            assert abs(counts[name] - round(0.1 * n)) <= largest, (key, counts)


def test_split_hand_checked():
    """Two strata of 10 distinct lines: exactly one test and one dev line each;
    a duplicated text goes to one split as a whole."""
    sents = [CmcSentence(i, 1, f"他像树{i}") for i in range(1, 11)]
    sents += [CmcSentence(i, 0, f"文字{i}") for i in range(11, 21)]
    split = make_split(sents)
    assert len(split["test"]) == 2 and len(split["dev"]) == 2 and len(split["train"]) == 16
    assert {s.line for s in sents if s.line in split["test"]} & set(range(1, 11))
    sents.append(CmcSentence(21, 0, "文字11"))
    split = make_split(sents)
    assert sum(11 in v and 21 in v for v in split.values()) == 1


# --- malformed lines -----------------------------------------------------------


@pytest.mark.parametrize(
    "text,line,fragment",
    [
        ("1\t他像一棵树\n0\t二九\t记念\n", 2, "3 fields"),
        ("1\t他像一棵树\n0 no tab\n", 2, "1 fields"),
        ("2\t他像一棵树\n", 1, "label must be 0 or 1"),
        ("1\t他像一棵树\n0\t  \n", 2, "empty text"),
        ("1\t他像一棵树\n\n0\t文字\n", 2, "1 fields"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, text: str, line: int, fragment: str):
    folder = write_tsv(tmp_path, text)
    path = folder / "train.tsv"
    with pytest.raises(CorpusFormatError) as info:
        list(read_cmc(path))
    assert info.value.line == line and info.value.path == str(path)
    assert f"{path}, line {line}:" in str(info.value) and fragment in str(info.value)
    with pytest.raises(CorpusFormatError):
        convert_cmc(folder, tmp_path / "out", spacy.blank("zh"), strict=True)


def test_malformed_lines_skipped_and_listed(tmp_path: Path):
    folder = write_tsv(tmp_path, "1\t他像一棵树 \n0\t二九\t记念\n0\t文字\n")
    result = convert_cmc(folder, tmp_path / "out", spacy.blank("zh"))
    assert [s["line"] for s in result["skipped"]] == [2]
    assert "line 2" in result["skipped"][0]["reason"]
    record = json.loads((tmp_path / "out" / "split.json").read_text(encoding="utf8"))
    assert record["skipped"] == result["skipped"]
    assert sorted(sum(record["splits"].values(), [])) == [1, 3]
    docs = list(read_docbin(tmp_path / "out" / "train.spacy", spacy.blank("zh").vocab))
    assert "他像一棵树" in [d.text for d in docs]  # surrounding whitespace stripped


def test_missing_file(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        convert_cmc(tmp_path, tmp_path / "out", spacy.blank("zh"))


# --- counting ------------------------------------------------------------------


def test_prf_hand_checked():
    r = prf([1, 1, 1, 0, 0], [True, False, True, True, False])
    assert (r["tp"], r["fp"], r["fn"], r["tn"]) == (2, 1, 1, 1)
    assert r["p"] == pytest.approx(2 / 3) and r["r"] == pytest.approx(2 / 3) and r["f"] == pytest.approx(2 / 3)
    empty = prf([0, 0], [False, False])
    assert empty["p"] == empty["r"] == empty["f"] == 0.0 and empty["tn"] == 2


def test_score_cmc_hand_checked():
    gold = [1, 1, 1, 0, 0, 1]
    preds = [{"metaphor"}, {"personification"}, {"literal"}, {"metaphor", "hyperbole"}, {"literal"}, {"metaphor"}]
    texts = ["他像树", "花儿笑了", "月亮象船", "好像要下雨", "今天晴", "他像树"]
    r = score_cmc(gold, preds, texts)
    # overall: TP = lines 1, 2, 6; FP = line 4; FN = line 3
    o = r["overall"]
    assert (o["tp"], o["fp"], o["fn"], o["tn"]) == (3, 1, 1, 1)
    assert o["p"] == pytest.approx(0.75) and o["r"] == pytest.approx(0.75) and o["f"] == pytest.approx(0.75)
    # with 像/象: lines 1, 3, 4, 6 -> TP 2 (1, 6), FN 1 (3), FP 1 (4)
    w = r["with_xiang"]
    assert (w["sentences"], w["tp"], w["fp"], w["fn"], w["tn"]) == (4, 2, 1, 1, 0)
    assert w["p"] == pytest.approx(2 / 3) and w["r"] == pytest.approx(2 / 3)
    # without: lines 2 (TP) and 5 (TN)
    wo = r["without_xiang"]
    assert (wo["sentences"], wo["tp"], wo["fp"], wo["fn"], wo["tn"]) == (2, 1, 0, 0, 1)
    assert wo["p"] == wo["r"] == wo["f"] == 1.0
    # metaphor alone: line 2 (personification) becomes a miss
    m = r["metaphor_only"]["overall"]
    assert (m["tp"], m["fp"], m["fn"]) == (2, 1, 2)
    assert m["p"] == pytest.approx(2 / 3) and m["r"] == pytest.approx(0.5) and m["f"] == pytest.approx(4 / 7)
    # distinct texts: line 6 repeats line 1
    d = r["distinct"]
    assert (d["sentences"], d["tp"], d["fp"], d["fn"]) == (5, 2, 1, 1)
    assert r["predicted_labels"] == {"hyperbole": 1, "literal": 2, "metaphor": 3, "personification": 1}


def test_score_cmc_rejects_bad_input():
    with pytest.raises(ValueError):
        score_cmc([1], [set(), set()], ["a"])
    with pytest.raises(ValueError):
        score_cmc([2], [set()], ["a"])


# --- evaluation driver on a rule pipeline ----------------------------------------


@Language.component("test_cmc_xiang_rule")
def _xiang_rule(doc):
    """Coarse metaphor for every sentence containing 像, else literal."""
    for token in doc[1:]:
        token.is_sent_start = False
    sent = doc[:]
    sent._.rhetoric = {"coarse": {"metaphor": 1.0} if "像" in sent.text else {"literal": 1.0}, "form": {}, "content": {}}
    return doc


def test_evaluate_cmc_end_to_end(tmp_path: Path):
    if not Span.has_extension("rhetoric"):
        Span.set_extension("rhetoric", default=None)
    folder = write_tsv(tmp_path, "1\t他像一棵树\n1\t花儿笑了\n0\t好像要下雨\n0\t今天晴\n" * 5)
    convert_cmc(folder, tmp_path / "corpus", spacy.blank("zh"))
    model = spacy.blank("zh")
    model.add_pipe("test_cmc_xiang_rule")
    model.to_disk(tmp_path / "model")
    out = tmp_path / "metrics" / "cmc.json"
    r = evaluate_cmc(tmp_path / "model", tmp_path / "corpus" / "train.spacy", output=out)
    assert json.loads(out.read_text(encoding="utf8"))["overall"] == r["overall"]
    o = r["overall"]
    # copies stay together, so the train split holds whole groups of the 4 texts
    n = o["sentences"] // 4
    assert o["sentences"] == 4 * n and (o["tp"], o["fp"], o["fn"], o["tn"]) == (n, n, n, n)
    assert r["without_xiang"]["fn"] == n and r["with_xiang"]["fp"] == n
    with pytest.raises(ValueError):
        evaluate_cmc(tmp_path / "model", _plain_docbin(tmp_path))


def _plain_docbin(tmp_path: Path) -> Path:
    from spacy_rhetoric.corpora.docbin import write_docbin

    path = tmp_path / "plain.spacy"
    write_docbin([spacy.blank("zh")("没有标签")], path)
    return path


# --- our reading of the label-1 texts (annotations/cmc-positives) ---------

ANNOTATIONS = Path(__file__).resolve().parent.parent / "annotations" / "cmc-positives"
STEMS = {"他像一棵树": 1, "花儿笑了": 1, "小草探出了头": 1, "月亮是小船": 1, "今天晴": 0}
DECIDED = {"他像一棵树": ["metaphor"], "花儿笑了": ["personification"], "小草探出了头": ["personification"], "月亮是小船": []}
COMPONENTS = {"花儿笑了": [("personification_object", 0, 2), ("personification_content", 2, 3)],
              "小草探出了头": [("personification_content", 2, 6)]}


def _annotated_corpus(tmp_path: Path):
    """Ten numbered texts of each stem (花儿笑了 0 twice), their split, and one
    record per label-1 text of the training split, on its first line."""
    from spacy_rhetoric.corpora.jsonio import text_sha1

    rows = [(label, f"{stem}{i}") for i in range(10) for stem, label in STEMS.items()] + [(1, "花儿笑了0")]
    folder = write_tsv(tmp_path, "".join(f"{label}\t{text}\n" for label, text in rows))
    convert_cmc(folder, tmp_path / "plain", spacy.blank("zh"))
    train = json.loads((tmp_path / "plain" / "split.json").read_text(encoding="utf8"))["splits"]["train"]
    first = {}
    for n in sorted(train):
        label, text = rows[n - 1]
        if label == 1:
            first.setdefault(text, n)
    records = []
    for text, n in sorted(first.items(), key=lambda kv: kv[1]):
        stem = text.rstrip("0123456789")
        records.append({"split": "train", "line": n, "text_sha1": text_sha1(text), "coarse": DECIDED[stem],
                        "components": [{"label": lab, "start": s, "end": e, "text": text[s:e]}
                                       for lab, s, e in COMPONENTS.get(stem, [])]})
    assert len(records) >= 3
    return folder, records


def test_read_positives_replace_the_disjunction(tmp_path: Path):
    folder, records = _annotated_corpus(tmp_path)
    result = convert_cmc(folder, tmp_path / "out", spacy.blank("zh"), annotations_dir=write_annotation_dir(tmp_path, records))
    train = result["splits"]["train"]
    assert train["annotated"] == train["positives"]  # every copy of a read text
    assert "annotated" not in result["splits"]["dev"]
    docs = list(read_docbin(tmp_path / "out" / "train.spacy", spacy.blank("zh").vocab))
    by_text = defaultdict(list)
    for doc in docs:
        by_text[doc.text].append(doc)
    flowers = [d for t, ds in by_text.items() if t.startswith("花儿笑了") for d in ds]
    assert flowers
    for doc in flowers:
        assert [s.label_ for s in doc.spans["rhetoric"]] == ["personification"]
        assert {(s.label_, s.text) for s in doc.spans["rhetoric_components"]} == {
            ("personification_object", "花儿"), ("personification_content", "笑")}
        assert DISJUNCTIONS_KEY not in doc.user_data
        assert annotated_labels(doc) >= {"coarse/metaphor", "coarse/personification", "coarse/literal"}
    for doc in (d for t, ds in by_text.items() if t.startswith("月亮是小船") for d in ds):  # neither: literal unknown
        assert not doc.spans["rhetoric"]
        assert "coarse/literal" not in annotated_labels(doc) and "coarse/personification" in annotated_labels(doc)
    for doc in (d for t, ds in by_text.items() if t.startswith("今天晴") for d in ds):  # label 0 as before
        assert list(doc.user_data[ANNOTATED_KEY]["coarse"]) == ["metaphor", "personification"]
    # dev and test are converted as without the reading
    plain = [d.user_data for d in read_docbin(tmp_path / "plain" / "dev.spacy", spacy.blank("zh").vocab)]
    assert [d.user_data for d in read_docbin(tmp_path / "out" / "dev.spacy", spacy.blank("zh").vocab)] == plain


@pytest.mark.parametrize("change, message", [
    ({"line": 10_000}, "is not the first line of a label-1 text"),
    ({"coarse": ["hyperbole"]}, "'coarse' must be a list of metaphor, personification"),
    ({"coarse": ["metaphor"], "components": [{"label": "personification_object", "start": 0, "end": 1, "text": "他"}]},
     "not a personification"),
    ({"text_sha1": "000000000000"}, "is not that of CMC line"),
    ({"same": True}, "annotated twice"),
])
def test_malformed_positive_record_names_file_and_line(tmp_path: Path, change, message):
    folder, records = _annotated_corpus(tmp_path)
    good, bad = records[0], dict(records[1])
    if change.pop("same", False):
        bad = dict(good)
    bad.update(change)
    with pytest.raises(CorpusFormatError) as err:
        convert_cmc(folder, tmp_path / "out", spacy.blank("zh"), annotations_dir=write_annotation_dir(tmp_path, [good, bad]))
    assert "train.jsonl, line 2" in str(err.value) and message in str(err.value)


def test_the_reading_covers_every_label1_training_text(shared_data):
    """One record per distinct label-1 text of our training split, on its
    first line, made on that text."""
    from spacy_rhetoric.corpora.jsonio import text_sha1

    sentences = list(read_cmc(shared_data / "cmc" / "train.tsv", skipped=[]))
    train = set(make_split(sentences)["train"])
    first = {}
    for sent in sorted(sentences, key=lambda s: s.line):
        if sent.line in train and sent.label == 1:
            first.setdefault(sent.text, sent.line)
    records = [json.loads(line) for line in (ANNOTATIONS / "train.jsonl").read_text(encoding="utf8").splitlines()]
    assert sorted(r["line"] for r in records) == sorted(first.values())
    text_of = {line: text for text, line in first.items()}
    assert all(r["text_sha1"] == text_sha1(text_of[r["line"]]) for r in records)
    second = [json.loads(line) for line in (ANNOTATIONS / "second_pass.jsonl").read_text(encoding="utf8").splitlines()]
    assert {r["line"] for r in second} <= {r["line"] for r in records}
