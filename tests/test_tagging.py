"""RPD tagging schemes: round trips, ill-formed decoding, transition constraints."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spacy_rhetoric.spangroups import parallelism_offsets
from spacy_rhetoric.ml.tagging import LINK_TYPES, TAGSETS, TagScheme, decode, encode, parse_tag

from pse_cache import all_docs

SCHEMES = [TagScheme(t, l) for t in TAGSETS for l in LINK_TYPES]


@st.composite
def flat_parallelisms(draw):
    """A text length and a random set of parallelisms (>= 2 branches each,
    branches non-overlapping, possibly interleaved between parallelisms)."""
    n_branches = draw(st.integers(0, 9))
    branches, pos = [], 0
    for _ in range(n_branches):
        pos += draw(st.integers(0, 4))
        length = draw(st.integers(1, 5))
        branches.append((pos, pos + length))
        pos += length
    n_words = pos + draw(st.integers(0, 4))
    if n_branches < 2:
        return max(n_words, 1), []
    n_groups = draw(st.integers(1, n_branches // 2))
    # every group gets two branches first, the rest are assigned at random
    order = draw(st.permutations(range(n_branches)))
    owner = {}
    for g in range(n_groups):
        owner[order[2 * g]] = g
        owner[order[2 * g + 1]] = g
    for i in order[2 * n_groups:]:
        owner[i] = draw(st.integers(0, n_groups - 1))
    groups = [sorted(b for i, b in enumerate(branches) if owner[i] == g) for g in range(n_groups)]
    return max(n_words, 1), sorted(groups)


@settings(max_examples=150, deadline=None)
@given(flat_parallelisms(), st.sampled_from(SCHEMES))
def test_roundtrip_random(case, scheme):
    n_words, groups = case
    tags = scheme.encode(groups, n_words)
    assert len(tags) == n_words
    assert scheme.decode(tags) == groups


@settings(max_examples=150, deadline=None)
@given(flat_parallelisms(), st.sampled_from(SCHEMES))
def test_encodings_satisfy_constraints(case, scheme):
    n_words, groups = case
    types = [parse_tag(t)[0] for t in scheme.encode(groups, n_words)]
    starts, bigrams, ends = scheme.allowed_type_bigrams()
    assert types[0] in starts and types[-1] in ends
    assert all(pair in bigrams for pair in zip(types, types[1:]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["O", "M", "B", "I", "J", "E", "B:-1", "B:-2", "B:-3", "B:-7"]), max_size=30),
       st.sampled_from(LINK_TYPES))
def test_decode_is_total_and_well_formed(tags, link):
    """Every tag sequence decodes to flat parallelisms of >= 2 branches."""
    groups = decode(tags, link)
    flat = sorted(b for g in groups for b in g)
    assert all(len(g) >= 2 for g in groups)
    assert all(0 <= s < e <= len(tags) for s, e in flat)
    assert all(a[1] <= b[0] for a, b in zip(flat, flat[1:]))


def test_every_pse_document_roundtrips_in_every_scheme(pse_dir):
    docs = all_docs(pse_dir)
    assert len(docs) > 3000
    n_groups = 0
    for doc in docs:
        gold = parallelism_offsets(doc)
        n_groups += len(gold)
        for scheme in SCHEMES:
            tags = scheme.encode(gold, len(doc))
            assert scheme.decode(tags) == gold, (doc.user_data.get("essay_id"), scheme)
    assert n_groups == 786  # all PSE-I parallelisms (data/README.md)


def test_pse_encodings_satisfy_constraints(pse_dir):
    docs = all_docs(pse_dir)[:800]
    for scheme in SCHEMES:
        starts, bigrams, ends = scheme.allowed_type_bigrams()
        for doc in docs:
            types = [parse_tag(t)[0] for t in scheme.encode(parallelism_offsets(doc), len(doc))]
            assert types[0] in starts and types[-1] in ends
            assert set(zip(types, types[1:])) <= bigrams


def test_paper_figure_4():
    """Fig. 4 of Bothwell et al. 2023: three branches, one parallelism."""
    groups = [[(0, 3), (5, 7), (9, 13)]]
    assert encode(groups, 14, "BIO", "token") == ["B", "I", "I", "O", "O", "B:-3", "I", "O", "O", "B:-3", "I", "I", "I", "O"]
    assert encode(groups, 14, "BIOMJ", "token") == ["B", "I", "I", "M", "M", "B:-3", "J", "M", "M", "B:-3", "J", "J", "J", "O"]
    assert encode(groups, 14, "BIOME", "branch") == ["B", "I", "E", "M", "M", "B:-1", "E", "M", "M", "B:-1", "I", "I", "E", "O"]


def test_interlocking_links():
    """Branch distance counts all branches; token distance skips to the previous branch's end."""
    groups = [[(0, 2), (6, 8)], [(3, 5), (9, 11)]]
    token = encode(groups, 12, "BIOM", "token")
    branch = encode(groups, 12, "BIOM", "branch")
    assert token[6] == "B:-5" and token[9] == "B:-5"
    assert branch[6] == "B:-2" and branch[9] == "B:-2"
    assert token[2] == "M" and token[5] == "M" and token[8] == "M"
    assert decode(token, "token") == groups and decode(branch, "branch") == groups


@pytest.mark.parametrize(
    "tags,link,expected",
    [
        (["B", "I", "O", "B:-4", "I"], "token", []),  # dangling token link: no branch ends at -3
        (["B", "I", "O", "B:-2", "I"], "branch", []),  # branch link past the start
        (["B", "I", "O", "O"], "token", []),  # a single branch is no parallelism
        (["O", "I", "I", "O", "B:-2", "I"], "token", [[(1, 3), (4, 6)]]),  # stray I opens a branch
        (["B", "E", "E", "B:-2"], "token", [[(0, 2), (3, 4)]]),  # E closes; second E opens & closes (2,3)
        (["B", "I", "M", "B:-2", "J", "B:-1", "J"], "token", [[(0, 2), (3, 5), (5, 7)]]),
        (["B", "I", "M", "B:-2", "J", "B:-2", "J"], "token", [[(0, 2), (3, 5)]]),  # last link dangles
        (["B", "B:-1"], "token", [[(0, 1), (1, 2)]]),
        (["B", "B:0"], "token", []),  # a non-negative link is dangling
    ],
)
def test_ill_formed_decoding(tags, link, expected):
    assert decode(tags, link) == expected


def test_errors():
    with pytest.raises(ValueError, match="overlaps"):
        encode([[(0, 3), (2, 5)]], 6)
    with pytest.raises(ValueError, match="outside"):
        encode([[(0, 3), (4, 9)]], 6)
    with pytest.raises(ValueError, match=r"\[R107\]"):
        TagScheme("BIOX", "token")
    with pytest.raises(ValueError, match=r"\[R108\]"):
        decode(["O"], "word")
    with pytest.raises(ValueError, match="position 1"):
        decode(["O", "X"])
    assert encode([], 0) == [] and decode([]) == []


def test_m_and_j_forbid_single_branches():
    """With M and J, an initial branch can never be followed by O (§6.1)."""
    starts, bigrams, ends = TagScheme("BIOMJ", "token").allowed_type_bigrams()
    assert ("I", "O") not in bigrams and ("B", "O") not in bigrams and ("J", "O") in bigrams
    assert "I" not in ends and "M" not in ends and "M" not in starts
    _, bio_bigrams, _ = TagScheme("BIO", "token").allowed_type_bigrams()
    assert ("I", "O") in bio_bigrams
