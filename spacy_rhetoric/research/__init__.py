"""Studies behind the published figures, apart from the product.

Nothing outside this package imports it (``tests/test_package_layout.py``).
Its extra dependencies are in the ``research`` extra
(``pip install 'spacy-rhetoric[research]'``): generation metrics (BLEU,
ROUGE-L, BERTScore, LLM judges; :mod:`.generation`), annotation and
meta-evaluation agreement (:mod:`.agreement`, :mod:`.annotation_agreement`,
:mod:`.blind_read`), whole-essay and CMC studies (:mod:`.whole_essays`,
:mod:`.cmc`), HAUSER on CMDAG (:mod:`.cmdag_hauser`) and the verifier's
object thresholds (:mod:`.object_thresholds`).
"""
