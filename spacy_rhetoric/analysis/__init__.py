"""``rhetoric analyze``: the driver (:mod:`.driver`), reading inputs and
writing outputs safely (:mod:`.io`), where the pipeline runs
(:mod:`.engines`), documents cut into bounded pieces (:mod:`.pieces`), the
``spacy-rhetoric/analysis/v1`` record (:mod:`.records`) and its HTML
rendering (:mod:`.render`).
"""
