"""srsly's msgpack codecs looked up once per process
(``spacy_rhetoric.msgpack_codecs_once.v1``, ``[nlp.after_creation]``)."""
from __future__ import annotations

from pathlib import Path

import catalogue
import pytest
import srsly

from spacy_rhetoric.runtime.msgpack_codecs import RegistryScan, look_up_msgpack_codecs_once

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))
CODECS = (srsly.msgpack_encoders, srsly.msgpack_decoders)


@pytest.fixture
def codecs_as_shipped_by_srsly(monkeypatch):
    """Both registries reading entry points on every call, as srsly makes
    them; restored after the test whatever an earlier ``spacy.load`` did."""
    for codecs in CODECS:
        monkeypatch.setattr(codecs, "entry_points", True)
        if "get_all" in vars(codecs):
            monkeypatch.delattr(codecs, "get_all")
    return monkeypatch


def test_stops_the_lookups_when_no_entry_point_is_declared(codecs_as_shipped_by_srsly):
    for codecs in CODECS:
        codecs_as_shipped_by_srsly.setattr(codecs, "get_entry_points", lambda: {})
    before = [codecs.get_all() for codecs in CODECS]
    assert look_up_msgpack_codecs_once() == ["srsly.msgpack_encoders", "srsly.msgpack_decoders"]
    assert [codecs.entry_points for codecs in CODECS] == [False, False]
    assert [codecs.get_all() for codecs in CODECS] == before
    assert all(isinstance(vars(codecs)["get_all"], RegistryScan) for codecs in CODECS)
    assert look_up_msgpack_codecs_once() == []  # nothing left to stop


def test_a_registry_with_a_declared_entry_point_keeps_reading_them(codecs_as_shipped_by_srsly):
    def encode_sets(obj, chain=None):  # what a package's entry point might register
        return sorted(obj) if isinstance(obj, set) else obj

    encoders, decoders = CODECS
    codecs_as_shipped_by_srsly.setattr(encoders, "get_entry_points", lambda: {"sets": encode_sets})
    codecs_as_shipped_by_srsly.setattr(decoders, "get_entry_points", lambda: {})
    assert look_up_msgpack_codecs_once() == ["srsly.msgpack_decoders"]
    assert encoders.entry_points is True and decoders.entry_points is False
    assert "get_all" not in vars(encoders) and encoders.get_all()["sets"] is encode_sets


def test_the_remembered_scan_follows_every_change_to_the_registry(codecs_as_shipped_by_srsly):
    encoders = srsly.msgpack_encoders
    codecs_as_shipped_by_srsly.setattr(encoders, "entry_points", False)
    scan = RegistryScan(encoders)
    codecs_as_shipped_by_srsly.setattr(catalogue, "REGISTRY", dict(catalogue.REGISTRY))

    def as_catalogue_scans():
        return catalogue.Registry.get_all(encoders)

    def encode_sets(obj, chain=None):
        return sorted(obj) if isinstance(obj, set) else obj

    def encode_frozensets(obj, chain=None):
        return sorted(obj) if isinstance(obj, frozenset) else obj

    answer = scan()
    assert answer == as_catalogue_scans() and "numpy" in answer
    answer["changed by the caller"] = None
    assert scan() == as_catalogue_scans()  # a new dict each call
    encoders.register("sets", func=encode_sets)  # added
    assert scan() == as_catalogue_scans() and scan()["sets"] is encode_sets
    encoders.register("sets", func=encode_frozensets)  # replaced: the same keys
    assert scan()["sets"] is encode_frozensets
    ours = ("srsly", "msgpack_encoders", "sets")
    other = next(key for key in catalogue.REGISTRY if key[:2] != ours[:2])
    del catalogue.REGISTRY[ours]  # removed: one fewer
    assert scan() == as_catalogue_scans() and "sets" not in scan()
    del catalogue.REGISTRY[other]  # removed elsewhere, then one of ours added: same length
    encoders.register("sets", func=encode_sets)
    assert scan() == as_catalogue_scans() and scan()["sets"] is encode_sets
    del catalogue.REGISTRY[ours]  # ours removed, one added elsewhere: same length
    catalogue.REGISTRY[other] = None
    assert scan() == as_catalogue_scans() and "sets" not in scan()
    elsewhere = next(key for key in catalogue.REGISTRY if key[:2] != ours[:2] and key != other)
    del catalogue.REGISTRY[elsewhere]  # one of ours added before the same last key: same length
    del catalogue.REGISTRY[other]
    encoders.register("sets", func=encode_sets)
    catalogue.REGISTRY[other] = None
    assert scan() == as_catalogue_scans() and scan()["sets"] is encode_sets
    codecs_as_shipped_by_srsly.setattr(encoders, "entry_points", True)
    codecs_as_shipped_by_srsly.setattr(encoders, "get_entry_points", lambda: {"frozensets": encode_frozensets})
    assert scan()["frozensets"] is encode_frozensets  # entry points read again when switched back on


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
def test_shipped_pipelines_set_it_and_their_docs_pack_to_the_same_bytes(
    pipeline: Path, pse_dir: Path, codecs_as_shipped_by_srsly
):
    import spacy
    from spacy.tokens import Doc

    from test_same_answer import essay_texts

    text = essay_texts(pse_dir)[0]
    # the first pipeline loaded in this process: lookups on every call
    nlp = spacy.load(pipeline, config={"nlp": {"after_creation": None}})
    doc = nlp(text)
    packed_by_lookups = doc.to_bytes()
    assert all(codecs.entry_points for codecs in CODECS)

    nlp = spacy.load(pipeline)
    assert nlp.config["nlp"]["after_creation"] == {"@callbacks": "spacy_rhetoric.msgpack_codecs_once.v1"}
    assert not any(codecs.entry_points for codecs in CODECS)
    assert doc.to_bytes() == packed_by_lookups
    unpacked = Doc(nlp.vocab).from_bytes(packed_by_lookups)
    assert {key: [(s.start, s.end, s.label_) for s in group] for key, group in unpacked.spans.items()} == {
        key: [(s.start, s.end, s.label_) for s in group] for key, group in doc.spans.items()
    }
    assert unpacked.to_bytes() == packed_by_lookups and len(doc.spans) >= 5
