"""A small CERD-format fixture written by the project itself (CERD is only
available from its authors). Layouts: ``spacy_rhetoric/corpora/cerd.py``.

Used by the tests and by hand (docs/training.md):
``python tests/cerd_fixture.py OUT_DIR`` writes rc/fc/cc/ce JSON files there.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

#: (sentence, coarse, form, content); empty lists = literal.
SENTENCES: List[Tuple[str, List[str], List[str], List[str]]] = [
    ("她的笑容像春天的阳光一样温暖。", ["比喻"], ["明喻"], ["实在物"]),
    ("老师是辛勤的园丁。", ["比喻"], ["暗喻"], ["实在物"]),
    ("小河唱着欢快的歌流向远方。", ["比拟"], ["动词"], ["拟人"]),
    ("我们今天上午去图书馆借书。", [], [], []),
    ("他的嗓门大得能把屋顶掀翻。", ["夸张"], ["直接夸张"], ["扩大夸张"]),
    ("爱是阳光，爱是雨露，爱是春风。", ["比喻", "排比"], ["暗喻", "句子排比"], ["抽象概念", "并列"]),
    ("月亮像一只小船挂在天上。", ["比喻"], ["明喻"], ["实在物"]),
    ("晚饭后妈妈在厨房洗碗。", [], [], []),
    ("风儿轻轻地抚摸着我的脸。", ["比拟"], ["动词"], ["拟人"]),
    ("这点小事比芝麻还小。", ["夸张"], ["直接夸张"], ["缩小夸张"]),
    ("时间像流水一样一去不复返。", ["比喻"], ["明喻"], ["动作"]),
    ("操场上有很多同学在跑步。", [], [], []),
]

#: CE: sentence -> [(substring, CERD BIO type)], each substring's first occurrence.
COMPONENTS: Dict[str, List[Tuple[str, str]]] = {
    "她的笑容像春天的阳光一样温暖。": [("笑容", "METAPHOR-TENOR"), ("像", "METAPHOR-COMPARATOR"), ("阳光", "METAPHOR-VEHICLE")],
    "老师是辛勤的园丁。": [("老师", "METAPHOR-TENOR"), ("园丁", "METAPHOR-VEHICLE")],
    "小河唱着欢快的歌流向远方。": [("小河", "PERSONIFICATION-OBJECT"), ("唱着欢快的歌", "PERSONIFICATION-CONTENT")],
    "我们今天上午去图书馆借书。": [],
    "他的嗓门大得能把屋顶掀翻。": [("嗓门", "HYPERBOLE-OBJECT"), ("能把屋顶掀翻", "HYPERBOLE-CONTENT")],
    "月亮像一只小船挂在天上。": [("月亮", "METAPHOR-TENOR"), ("像", "METAPHOR-COMPARATOR"), ("小船", "METAPHOR-VEHICLE")],
    "晚饭后妈妈在厨房洗碗。": [],
    "风儿轻轻地抚摸着我的脸。": [("风儿", "PERSONIFICATION-OBJECT"), ("抚摸着我的脸", "PERSONIFICATION-CONTENT")],
    "时间像流水一样一去不复返。": [("时间", "METAPHOR-TENOR"), ("像", "METAPHOR-COMPARATOR"), ("流水", "METAPHOR-VEHICLE")],
    "操场上有很多同学在跑步。": [],
}


def ce_tags(sentence: str, parts: List[Tuple[str, str]]) -> List[str]:
    """Per-character BIO tags of ``parts`` in ``sentence``."""
    tags = ["O"] * len(sentence)
    for text, bio in parts:
        start = sentence.index(text)
        tags[start] = f"B-{bio}"
        for i in range(start + 1, start + len(text)):
            tags[i] = f"I-{bio}"
    return tags


def records() -> Dict[str, list]:
    """The fixture's records per CERD task (rc, fc, cc, ce)."""
    return {
        "rc": [{"sentence": s, "rhetoricList": c or None} for s, c, _, _ in SENTENCES],
        "fc": [{"sentence": s, "rhetoricList": [{"form": f} for f in fs] or None} for s, _, fs, _ in SENTENCES],
        "cc": [{"sentence": s, "rhetoricList": [{"content": c} for c in cs] or None} for s, _, _, cs in SENTENCES],
        "ce": [{"sentence": s, "tags": ce_tags(s, parts)} for s, parts in COMPONENTS.items()],
    }


def write_cerd_fixture(folder: Path) -> Dict[str, Path]:
    """Write ``cerd_<task>.json`` for rc/fc/cc/ce to ``folder``; returns the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for task, recs in records().items():
        paths[task] = folder / f"cerd_{task}.json"
        paths[task].write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf8")
    return paths


if __name__ == "__main__":
    for task, path in write_cerd_fixture(Path(sys.argv[1])).items():
        print(task, path)
