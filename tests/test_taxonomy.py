from spacy_rhetoric import taxonomy as tx


def test_label_inventories_match_design():
    assert tx.COARSE_LABELS == ("metaphor", "personification", "hyperbole", "parallelism", "literal")
    assert len(tx.FORM) == 12 and tx.FORM_LABELS[-1] == "literal"
    assert len(tx.CONTENT) == 11 and tx.CONTENT_LABELS[-1] == "literal"
    assert set(tx.COMPONENT_LABELS) == {
        "comparator", "tenor", "vehicle", "personification_object", "personification_content",
        "hyperbole_object", "hyperbole_content", "parallelism_marker",
    }
    assert len(tx.CONFIGURE_FIGURES) == 12


def test_every_fine_label_has_a_coarse_parent_and_required_components():
    for level in ("form", "content"):
        for coarse in tx.COARSE_ZH:
            assert tx.children(level, coarse), (level, coarse)
    assert set(tx.REQUIRED_COMPONENTS) == set(tx.FORM)
    assert tx.REQUIRED_COMPONENTS["simile"] == {"comparator", "tenor", "vehicle"}
    assert tx.REQUIRED_COMPONENTS["metonymy"] == {"vehicle"}


def test_chinese_names_round_trip():
    for level, table in (("form", tx.FORM), ("content", tx.CONTENT)):
        for label, (_, zh) in table.items():
            assert tx.from_zh(level, zh) == label
            assert tx.zh_name(level, label) == zh
    assert tx.from_zh("coarse", "排比") == "parallelism"
    assert tx.parent("form", "simile") == "metaphor"
    assert tx.parent("content", "gradation") == "parallelism"


def test_hierarchy_consistency():
    assert tx.is_consistent({"metaphor"}, {"simile"}, "form")
    assert not tx.is_consistent({"metaphor", "hyperbole"}, {"simile"}, "form")
    assert not tx.is_consistent({"metaphor"}, {"simile", "verb"}, "form")
    assert tx.is_consistent({"literal"}, {"literal"}, "content")
    assert not tx.is_consistent({"literal", "metaphor"}, {"simile"}, "form")
