"""The label inventories of spacy-rhetoric: one source of truth.

Sources:
- CERD (Liu et al. 2024, ``papers/000``, §3.1 and Appendix B, Table 11): the
  coarse (RC), form (FC) and content (CC) levels, their hierarchy, and the
  rhetorical components (CE) each form label requires.
- ConFiguRe (Zhu et al. 2022, ``papers/001``, §3): the 12 figure types.

Label strings are English snake_case identifiers (DESIGN §5, §6); Chinese
names live only in the tables below and are used by converters and prompts.
"""
from __future__ import annotations

from typing import Dict, FrozenSet, List, Tuple

LITERAL = "literal"

#: Coarse devices (RC) with their Chinese names, ``literal`` excluded.
COARSE_ZH: Dict[str, str] = {
    "metaphor": "比喻",
    "personification": "比拟",
    "hyperbole": "夸张",
    "parallelism": "排比",
}
COARSE_LABELS: Tuple[str, ...] = (*COARSE_ZH, LITERAL)

#: Form labels (FC): label -> (coarse parent, Chinese name).
FORM: Dict[str, Tuple[str, str]] = {
    "simile": ("metaphor", "明喻"),
    "metaphor": ("metaphor", "暗喻"),
    "metonymy": ("metaphor", "借喻"),
    "noun": ("personification", "名词"),
    "verb": ("personification", "动词"),
    "adjective": ("personification", "形容词"),
    "adverb": ("personification", "副词"),
    "direct_hyperbole": ("hyperbole", "直接夸张"),
    "indirect_hyperbole": ("hyperbole", "间接夸张"),
    "mixed_hyperbole": ("hyperbole", "融合夸张"),
    "structure_parallelism": ("parallelism", "成分排比"),
    "sentence_parallelism": ("parallelism", "句子排比"),
}
FORM_LABELS: Tuple[str, ...] = (*FORM, LITERAL)

#: Content labels (CC): label -> (coarse parent, Chinese name).
CONTENT: Dict[str, Tuple[str, str]] = {
    "concrete": ("metaphor", "实在物"),
    "action": ("metaphor", "动作"),
    "abstract": ("metaphor", "抽象概念"),
    "personification": ("personification", "拟人"),
    "anthropomorphism": ("personification", "拟物"),
    "amplification": ("hyperbole", "扩大夸张"),
    "understatement": ("hyperbole", "缩小夸张"),
    "prolepsis": ("hyperbole", "超前夸张"),
    "coordination": ("parallelism", "并列"),
    "subordination": ("parallelism", "承接"),
    "gradation": ("parallelism", "递进"),
}
CONTENT_LABELS: Tuple[str, ...] = (*CONTENT, LITERAL)

LEVELS: Tuple[str, ...] = ("coarse", "form", "content")
LEVEL_LABELS: Dict[str, Tuple[str, ...]] = {
    "coarse": COARSE_LABELS,
    "form": FORM_LABELS,
    "content": CONTENT_LABELS,
}

#: Component types (CE): label -> (coarse device, role, CERD BIO type).
#: Roles are CERD's abstraction: connector / object / content (§3.1).
COMPONENTS: Dict[str, Tuple[str, str, str]] = {
    "comparator": ("metaphor", "connector", "METAPHOR-COMPARATOR"),
    "tenor": ("metaphor", "object", "METAPHOR-TENOR"),
    "vehicle": ("metaphor", "content", "METAPHOR-VEHICLE"),
    "personification_object": ("personification", "object", "PERSONIFICATION-OBJECT"),
    "personification_content": ("personification", "content", "PERSONIFICATION-CONTENT"),
    "hyperbole_object": ("hyperbole", "object", "HYPERBOLE-OBJECT"),
    "hyperbole_content": ("hyperbole", "content", "HYPERBOLE-CONTENT"),
    "parallelism_marker": ("parallelism", "connector", "PARALLELISM-MARKER"),
}
COMPONENT_LABELS: Tuple[str, ...] = tuple(COMPONENTS)
COMPONENT_ZH: Dict[str, str] = {
    "comparator": "比喻词",
    "tenor": "本体",
    "vehicle": "喻体",
    "personification_object": "比拟对象",
    "personification_content": "比拟内容",
    "hyperbole_object": "夸张对象",
    "hyperbole_content": "夸张内容",
    "parallelism_marker": "排比标志词",
}

#: Components a sentence with this form label must contain (CERD App. B).
REQUIRED_COMPONENTS: Dict[str, FrozenSet[str]] = {
    "simile": frozenset({"comparator", "tenor", "vehicle"}),
    "metaphor": frozenset({"tenor", "vehicle"}),
    "metonymy": frozenset({"vehicle"}),
    **{
        form: frozenset({"personification_object", "personification_content"})
        for form in ("noun", "verb", "adjective", "adverb")
    },
    **{
        form: frozenset({"hyperbole_object", "hyperbole_content"})
        for form in ("direct_hyperbole", "indirect_hyperbole", "mixed_hyperbole")
    },
    "structure_parallelism": frozenset({"parallelism_marker"}),
    "sentence_parallelism": frozenset({"parallelism_marker"}),
}

#: The object component of each coarse device (used by generation, CERD RG).
OBJECT_COMPONENT: Dict[str, str] = {
    "metaphor": "tenor",
    "personification": "personification_object",
    "hyperbole": "hyperbole_object",
}

#: The component that names what a requested (generated) device is about:
#: the object of CERD's RG for metaphor, personification and hyperbole, and
#: the marker (the word the branches repeat) for parallelism, which CERD's
#: RG leaves out and our suggestions cover.
REQUEST_OBJECT: Dict[str, str] = {**OBJECT_COMPONENT, "parallelism": "parallelism_marker"}

#: ConFiguRe's 12 figure types: label -> Chinese name.
CONFIGURE_FIGURES: Dict[str, str] = {
    "metaphor": "比喻",
    "personification": "比拟",
    "metonymy": "借代",
    "hyperbole": "夸张",
    "irony": "反语",
    "synaesthesia": "通感",
    "rhetorical_question": "问语",
    "parallelism": "排比",
    "duality": "对偶",
    "repetition": "反复",
    "antithesis": "对比",
    "quote": "引语",
}


def _parent_table(level: str) -> Dict[str, Tuple[str, str]]:
    if level == "form":
        return FORM
    if level == "content":
        return CONTENT
    raise ValueError(f"Unknown fine level {level!r}; expected 'form' or 'content'.")


def parent(level: str, label: str) -> str:
    """Return the coarse device of a fine ``label`` at ``level``.

    ``literal`` maps to ``literal``. Raises ``KeyError`` for an unknown label
    and ``ValueError`` for an unknown level.
    """
    if label == LITERAL:
        return LITERAL
    return _parent_table(level)[label][0]


def children(level: str, coarse: str) -> List[str]:
    """The fine labels of ``level`` ('form' or 'content') under ``coarse``."""
    if coarse == LITERAL:
        return [LITERAL]
    return [lab for lab, (par, _) in _parent_table(level).items() if par == coarse]


def zh_name(level: str, label: str) -> str:
    """Chinese name of ``label`` at ``level`` (coarse/form/content/component)."""
    if label == LITERAL:
        return "无修辞"
    if level == "coarse":
        return COARSE_ZH[label]
    if level == "component":
        return COMPONENT_ZH[label]
    return _parent_table(level)[label][1]


def from_zh(level: str, name: str) -> str:
    """Label for a Chinese name at ``level``; raises ``KeyError`` if unknown."""
    if level == "coarse":
        table = {zh: lab for lab, zh in COARSE_ZH.items()}
    else:
        table = {zh: lab for lab, (_, zh) in _parent_table(level).items()}
    return table[name]


def is_consistent(coarse: set, fine: set, level: str) -> bool:
    """Hierarchy consistency of one sentence's labels: every coarse device has
    at least one fine label of ``level`` under it and no fine label lacks its
    coarse parent; ``literal`` stands alone at both levels. Stricter than
    CERD's correct mapping (§5.1), which checks only coarse -> fine."""
    if LITERAL in coarse or LITERAL in fine:
        return coarse == {LITERAL} and fine == {LITERAL}
    parents = {parent(level, lab) for lab in fine}
    return parents == set(coarse)
