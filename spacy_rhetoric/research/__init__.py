"""Studies behind the published figures, apart from the product.

Nothing outside this package imports it but the command line, inside the
commands of ``rhetoric research`` (``tests/test_package_layout.py``).
Its extra dependencies are in the ``research`` extra
(``pip install 'spacy-rhetoric[research]'``): generation metrics (BLEU,
ROUGE-L, BERTScore, LLM judges; :mod:`.generation`), annotation and
meta-evaluation agreement (:mod:`.agreement`, :mod:`.annotation_agreement`,
:mod:`.blind_read`), the classifiers on gold units and their gold-unit
thresholds (:mod:`.gold_units`, upper bounds), whole-essay and CMC studies (:mod:`.whole_essays`,
:mod:`.cmc`), HAUSER on CMDAG (:mod:`.cmdag_hauser`) and the verifier's
object thresholds (:mod:`.object_thresholds`).
"""
