"""The linker's clause features, replacing a component in a shipped pipeline,
and the short comma parallelisms (three or more clauses in one sentence)."""
from pathlib import Path

import numpy
import pytest
import spacy
import srsly
from spacy.tokens import Doc

from spacy_rhetoric.runtime.threads import torch_threads

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The BiLSTM on one thread: on a shared 2-core machine more threads are much slower."""
    with torch_threads(1):
        yield


def test_clauses_cover_every_word_and_end_at_clause_punctuation():
    from spacy_rhetoric.ml.parallelism_tagger import clauses_of

    words = ["他", "说", "：", "“", "好", "。", "”", "我们", "走", "，", "走", "\n", "跑"]
    assert clauses_of(words) == [(0, 4), (4, 7), (7, 10), (10, 12), (12, 13)]
    assert clauses_of([]) == []
    assert clauses_of(["、", "和"]) == [(0, 2)]  # 、 joins words inside a clause


def test_clause_features_mark_repeated_clause_starts_and_equal_lengths():
    from spacy_rhetoric.ml.parallelism_tagger import CLAUSE_FEATURES_WIDTH, clause_features

    words = ["我", "爱", "春天", "的", "花", "，", "我", "爱", "夏天", "的", "雨", "，", "他", "在", "读书", "。"]
    feats = clause_features(words)
    assert feats.shape == (16, CLAUSE_FEATURES_WIDTH) and feats.dtype == numpy.float32
    # block 0-4: clause 2 before; 5-9: 1 before; 10-14: 1 after; 15-19: 2 after (none, 0, 1, 2, 3+ shared start chars)
    assert feats[0, 0] == 1 and feats[0, 5] == 1 and feats[0, 10 + 3] == 1 and feats[0, 15 + 1] == 1
    assert feats[6, 5 + 3] == 1 and feats[6, 10 + 1] == 1  # 我爱 | 我爱夏天的雨 | 他在读书
    # with the clause after: equal length (bucket 0), its words found at the same offsets
    after = 20 + 15
    assert feats[0, after + 4] == 1 and feats[0, after + 13] == 1 and feats[0, after + 14] == 1
    assert feats[2, after + 13] == 0  # 春天 is not in 我爱夏天的雨
    # every word of a clause shares the clause's features but the skeleton and the word position
    clause_level = [k for k in range(CLAUSE_FEATURES_WIDTH - 3) if k not in (33, 34, 48, 49)]
    numpy.testing.assert_array_equal(feats[0, clause_level], feats[4, clause_level])
    assert feats[0, -3] == 1 and feats[4, -2] == 1 and feats[5, -1] == 1
    # a run of two clauses starting with 我; the last clause stands alone
    run = CLAUSE_FEATURES_WIDTH - 3 - 4
    assert feats[0, run + 1] == 1 and feats[12, run] == 1
    assert clause_features([]).shape == (0, CLAUSE_FEATURES_WIDTH)


def test_clause_features_do_not_reach_across_a_line_break():
    from spacy_rhetoric.ml.parallelism_tagger import ClauseFeatures, clause_features

    nlp = spacy.blank("zh")
    first, second = ["我", "爱", "花", "，", "我", "爱", "雨"], ["我", "爱", "叶", "。"]
    doc = Doc(nlp.vocab, words=first + ["\n"] + second, spaces=[False] * 12)
    (feats,), backprop = ClauseFeatures()([doc], is_train=True)
    numpy.testing.assert_array_equal(feats[:7], clause_features(first))
    numpy.testing.assert_array_equal(feats[8:], clause_features(second))
    assert backprop(None) + [1] == [1]  # no input gradient


def test_tagger_with_clause_features_reads_paragraphs_alone():
    """predict_by_paragraph gives each paragraph the emissions it gets alone."""
    from spacy_rhetoric.ml.paragraphs import paragraph_bounds
    from spacy_rhetoric.ml.parallelism_tagger import CLAUSE_FEATURES_WIDTH, build_parallelism_tagger, predict_by_paragraph

    nlp = spacy.blank("zh")
    tok2vec = spacy.registry.resolve({"x": {
        "@architectures": "spacy_rhetoric.ParagraphTok2Vec.v1",
        "embed": {"@architectures": "spacy.MultiHashEmbed.v2", "width": 16, "attrs": ["NORM"], "rows": [100],
                  "include_static_vectors": False},
        "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 16, "depth": 1, "window_size": 1,
                   "maxout_pieces": 2}}})["x"]
    model = build_parallelism_tagger(tok2vec, hidden_width=8, nO=5, repetition_features=True, clause_features=True)
    first, second = ["我", "爱", "花", "，", "我", "爱", "雨", "。"], ["你", "爱", "叶", "，", "你", "爱", "云"]
    whole = Doc(nlp.vocab, words=first + ["\n"] + second, spaces=[False] * 16)
    model.initialize(X=[whole])
    assert model.layers[0].layers[2].get_dim("nO") == CLAUSE_FEATURES_WIDTH
    assert len(paragraph_bounds(whole)) == 3
    emissions = predict_by_paragraph(model, [whole])[0]
    alone = predict_by_paragraph(model, [Doc(nlp.vocab, words=second, spaces=[False] * 7)])[0]
    assert emissions.shape == (16, 5)
    numpy.testing.assert_allclose(emissions[9:], alone, atol=1e-5)


def _tiny_tagger(clause_features: bool, seed: int):
    from thinc.api import fix_random_seed

    from spacy_rhetoric.ml.parallelism_tagger import build_parallelism_tagger

    fix_random_seed(seed)
    tok2vec = spacy.registry.resolve({"x": {
        "@architectures": "spacy_rhetoric.ParagraphTok2Vec.v1",
        "embed": {"@architectures": "spacy.MultiHashEmbed.v2", "width": 16, "attrs": ["NORM"], "rows": [100],
                  "include_static_vectors": False},
        "encode": {"@architectures": "spacy.MaxoutWindowEncoder.v2", "width": 16, "depth": 1, "window_size": 1,
                   "maxout_pieces": 2}}})["x"]
    return build_parallelism_tagger(tok2vec, hidden_width=8, nO=5, repetition_features=True, clause_features=clause_features)


def test_parallelism_average_is_the_weighted_mean_of_emissions_and_crf_scores():
    from spacy_rhetoric.ml.parallelism_tagger import average_crf, build_parallelism_average, predict_by_paragraph

    nlp = spacy.blank("zh")
    words = ["我", "爱", "花", "，", "我", "爱", "雨", "\n", "你", "爱", "叶", "。"]
    doc = Doc(nlp.vocab, words=words, spaces=[False] * len(words))
    first, second = _tiny_tagger(False, 0), _tiny_tagger(True, 1)
    first.initialize(X=[doc])
    second.initialize(X=[doc])
    for k, layer in enumerate((first, second)):  # CRF scores as trained members have them
        crf = layer.get_ref("crf")
        for name in ("start", "trans", "end"):
            crf.set_param(name, crf.get_param(name) + numpy.float32(k + 1))
    model = build_parallelism_average(first, second, 0.25)
    average_crf(model)
    numpy.testing.assert_allclose(model.get_ref("crf").get_param("trans"), numpy.full((5, 5), 1.25, dtype="float32"))
    (mean,) = model.predict([doc])
    (a,), (b,) = first.predict([doc]), second.predict([doc])
    numpy.testing.assert_allclose(mean, 0.75 * a + 0.25 * b, rtol=1e-5, atol=1e-6)
    numpy.testing.assert_allclose(predict_by_paragraph(model, [doc])[0],
                                  0.75 * predict_by_paragraph(first, [doc])[0] + 0.25 * predict_by_paragraph(second, [doc])[0],
                                  rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        build_parallelism_average(first, second, 1.5)


def test_bump_patch():
    from spacy_rhetoric.packaging import bump_patch

    assert bump_patch("0.4.4") == "0.4.5" and bump_patch("1.2.9") == "1.2.10" and bump_patch("0.4.4.dev0") == "0.4.5"
    with pytest.raises(ValueError):
        bump_patch("0.4")


def test_swap_component_replaces_one_component_under_the_lock(tmp_path: Path):
    """The swap reads the target as it is when the lock is free, changes only
    the named component and the version, and leaves no lock or temp folder."""
    from spacy_rhetoric.packaging import swap_component

    target = spacy.blank("zh")
    target.add_pipe("sentencizer", config={"punct_chars": ["。"]})
    target.add_pipe("entity_ruler").add_patterns([{"label": "X", "pattern": "花"}])
    target.meta["version"] = "0.4.4"
    target.to_disk(tmp_path / "target")
    source = spacy.blank("zh")
    source.add_pipe("sentencizer", config={"punct_chars": ["！"]})
    source.to_disk(tmp_path / "source")
    lock = tmp_path / "pipelines.lock"
    assert swap_component(tmp_path / "target", tmp_path / "source", "sentencizer", lock=lock) == "0.4.5"
    nlp = spacy.load(tmp_path / "target")
    assert nlp.pipe_names == ["sentencizer", "entity_ruler"]
    doc = nlp("花开了！花落了。")
    assert [s.text for s in doc.sents] == ["花开了！", "花落了。"] and [e.text for e in doc.ents] == ["花", "花"]
    assert srsly.read_json(tmp_path / "target" / "meta.json")["version"] == "0.4.5"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source", "target"]
    with pytest.raises(ValueError, match="no component"):
        swap_component(tmp_path / "target", tmp_path / "source", "tagger", lock=lock)
    assert not lock.exists()


def test_swap_component_writes_the_given_version_instead_of_bumping(tmp_path: Path):
    from spacy_rhetoric.packaging import swap_component

    target = spacy.blank("zh")
    target.add_pipe("sentencizer", config={"punct_chars": ["。"]})
    target.meta["version"] = "0.4.4"
    target.to_disk(tmp_path / "target")
    source = spacy.blank("zh")
    source.add_pipe("sentencizer", config={"punct_chars": ["！"]})
    source.to_disk(tmp_path / "source")
    assert swap_component(tmp_path / "target", tmp_path / "source", "sentencizer", version="0.4.9") == "0.4.9"
    nlp = spacy.load(tmp_path / "target")
    assert nlp.meta["version"] == "0.4.9" and [s.text for s in nlp("花开了！花落了。").sents] == ["花开了！", "花落了。"]


#: Short parallelisms of three or more comma-separated clauses in one
#: sentence, written for this test (none is from a corpus the pipelines
#: were trained or chosen on).
SHORT_PARALLELISMS = [
    "他走过了高山，走过了草原，走过了沙漠。",
    "我们要热爱生活，热爱学习，热爱劳动。",
    "读书使人明智，读史使人明理，读诗使人灵秀。",
    "春天是绿色的，夏天是红色的，秋天是金色的，冬天是白色的。",
    "她用微笑面对困难，用汗水浇灌梦想，用坚持书写青春。",
    "有的人在奔跑，有的人在散步，有的人在静静地看书。",
    "我想变成一朵云，我想变成一阵风，我想变成一棵树。",
    "时间是一位老师，时间是一把尺子，时间是一面镜子。",
]


#: Sentences of SHORT_PARALLELISMS each pipeline's linker misses (no
#: parallelism of three branches, one per clause): zh_rhetoric 0.4.8 finds
#: two of the eight, zh_rhetoric_trf 0.4.9 seven (docs/experiments.md).
#: Marked as expected failures, strictly, so that a linker that starts to
#: find one fails the test until the mark is removed.
MISSED = {
    "zh_rhetoric": {0, 1, 2, 5, 6, 7},
    "zh_rhetoric_trf": {1},
}


def _short_cases():
    for pipeline in PIPELINES:
        for k, text in enumerate(SHORT_PARALLELISMS):
            marks = [pytest.mark.xfail(strict=True, reason=f"{pipeline.name}'s linker misses it")] \
                if k in MISSED.get(pipeline.name, ()) else []
            yield pytest.param(pipeline, text, id=f"{pipeline.name}-{k}", marks=marks)


@pytest.fixture(scope="module")
def loaded():
    """Each shipped pipeline up to its parallelism linker, loaded once."""
    cache = {}

    def load(path: Path):
        if path not in cache:
            cache[path] = spacy.load(path, exclude=["rhetoric_textcat", "rhetoric_components", "figurative_units"])
        return cache[path]

    return load


@pytest.mark.parametrize("pipeline,text", list(_short_cases()))
def test_short_comma_parallelisms_are_found(pipeline: Path, text: str, loaded):
    """The sentence alone, as a user types it: the linker finds a
    parallelism of at least three branches, each inside one clause."""
    from spacy_rhetoric import parallelisms

    doc = loaded(pipeline)(text)
    found = [[b.text for b in g] for g in parallelisms(doc)]
    assert any(len(g) >= 3 and all("，" not in b for b in g) for g in found), found


@pytest.mark.parametrize("bias", [0.0, 0.3])
def test_linker_scores_raw_equal_evaluate_raw(shared_data: Path, bias: float):
    """The linker alone on real dev essays read as raw text gives the
    parallelism figures of the whole pipeline's raw-path evaluation, at the
    pipeline's own o_bias and at another, and leaves the o_bias as it was."""
    from spacy_rhetoric.evaluation.linker_raw import linker_scores_raw
    from spacy_rhetoric.evaluation.raw_path import predict_raw, read_gold, score_parallelism

    pipeline = ROOT / "pipelines" / "zh_rhetoric"
    if not (pipeline / "config.cfg").is_file():
        pytest.skip("no shipped zh_rhetoric")
    gold = read_gold("pse-i", shared_data, ROOT / "annotations" / "pse-i-cerd", "dev")[:4]
    nlp = spacy.load(pipeline)
    linker = nlp.get_pipe("parallelism_linker")
    own = linker.cfg["o_bias"]
    result = linker_scores_raw(nlp, gold, [None, bias])
    assert result["texts"] == 4 and linker.cfg["o_bias"] == own
    assert result["scores"][f"{own:g}"] == score_parallelism(gold, predict_raw(nlp, gold))
    linker.cfg["o_bias"] = bias
    assert result["scores"][f"{bias:g}"] == score_parallelism(gold, predict_raw(nlp, gold))
    with pytest.raises(ValueError, match="annotates parallelism"):
        linker_scores_raw(nlp, [g for g in read_gold("simile", shared_data, ROOT, "dev")[:2]])
