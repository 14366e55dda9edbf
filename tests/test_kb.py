"""The simile KB built from the real corpora: counts, normalisation, file round trip."""
import json

import pytest

from spacy_rhetoric.corpora.simile import split_path
from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.llm.kb import SimileKB, build_kb, normalize, pair_components


@pytest.fixture(scope="module")
def simile_train(simile_dir):
    return split_path(simile_dir, "train")


@pytest.fixture(scope="module")
def kb(simile_train, cmdag_dir):
    return build_kb([simile_train], [cmdag_dir / "val.json"])


def test_normalize_rules():
    assert normalize(" 一只 蝴蝶。") == "蝴蝶"
    assert normalize("两颗星星") == "星星"
    assert normalize("「火」") == "火"
    assert normalize("ＡＢ") == "ab"  # NFKC + lower case
    assert normalize("一个") == "一个"  # nothing would remain: kept
    assert normalize("……") == ""


def test_pair_components_nearest_tenor():
    spans = [(0, 1, "tenor"), (3, 5, "vehicle"), (6, 7, "tenor"), (9, 10, "vehicle"), (12, 13, "comparator")]
    vehicles, pairs = pair_components(spans)
    assert vehicles == [(3, 5), (9, 10)]
    assert pairs == [((0, 1), (3, 5)), ((6, 7), (9, 10))]
    # vehicle before any tenor pairs with the next tenor
    assert pair_components([(0, 2, "vehicle"), (4, 5, "tenor")])[1] == [((4, 5), (0, 2))]


def test_kb_counts_real_corpora(kb, simile_train, cmdag_dir):
    sims = [s for s in open(simile_train, encoding="utf8").read().split("\n\n") if s.startswith("simile")]
    cmdag = json.loads((cmdag_dir / "val.json").read_text(encoding="utf8"))
    by_name = {s["name"]: s for s in kb.sources}
    assert by_name["simile"]["samples"] == len(sims) == 3315
    # distinct records whose vehicle keeps a content character after normalisation
    distinct = {(r["metaphor_id"], r["sub_id"], r["tenor"], r["vehicle"]) for r in cmdag if normalize(r["vehicle"])}
    assert by_name["cmdag"]["samples"] == len(distinct) == 3445
    size = kb.size()
    assert size["samples"] == kb.samples == by_name["simile"]["samples"] + by_name["cmdag"]["samples"]
    assert size["pair_tokens"] == sum(kb.pair_counts.values())
    # every pair's vehicle is counted at least as often as the pair
    assert all(kb.vehicle_counts[v] >= n for (_, v), n in kb.pair_counts.items())
    # a frequent real vehicle of the simile corpus (蝴蝶 occurs in 46 tagged simile spans)
    assert kb.vehicle_frequency("蝴蝶") >= 46
    assert kb.vehicle_frequency("一只蝴蝶") == kb.vehicle_frequency("蝴蝶")
    # a CMDAG val pair is found whatever its spacing
    rec = cmdag[1]
    assert kb.n(" " + rec["tenor"], rec["vehicle"] + "。") >= 1
    assert kb.n("不存在的本体", "不存在的喻体") == 0


def test_kb_round_trip(kb, tmp_path):
    path = tmp_path / "kb.json"
    kb.to_disk(path)
    again = SimileKB.from_disk(path)
    assert again.pair_counts == kb.pair_counts
    assert again.vehicle_counts == kb.vehicle_counts
    assert again.size() == kb.size() and again.sources == kb.sources


def test_kb_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "spacy_rhetoric.SimileKB",\n "version": ', encoding="utf8")
    with pytest.raises(ValueError, match=r"bad.json, line 2"):
        SimileKB.from_disk(bad)
    other = tmp_path / "other.json"
    other.write_text("[]", encoding="utf8")
    with pytest.raises(ValueError, match="not a simile KB"):
        SimileKB.from_disk(other)
    tsv = tmp_path / "x-Train.tsv"
    tsv.write_text("simile\n月亮\tts\n像\tO\n船\tvq\n", encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"x-Train.tsv, line 4"):
        build_kb([tsv])
    with pytest.raises(ValueError, match="at least one"):
        build_kb()
