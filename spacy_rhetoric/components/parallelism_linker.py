"""The ``parallelism_linker`` component: rhetorical parallelism detection.

Encoder-CRF sequence labeller of Bothwell et al. 2023 (§6.2): a tok2vec (or
transformer) listener gives one vector per word, an optional BiLSTM encodes
the sequence, a linear layer maps to tag space and a linear-chain CRF
(:mod:`spacy_rhetoric.ml.crf`) scores tag sequences; Viterbi decoding gives one
tag per word, and the tags (:mod:`spacy_rhetoric.ml.tagging`, scheme and link
type set in the config) decode to parallelisms, written with
:func:`spacy_rhetoric.spangroups.set_parallelisms` (``doc.spans["parallelism"]``
plus one group per parallelism).

Long documents: there is no training window. The CNN, the BiLSTM and the
CRF all run over the whole document, so a document longer than any seen in
training is tagged in full (never truncated); links longer than any seen in
training cannot be predicted (their tags are not in the label set).
"""

from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, set_dropout_rate
from thinc.types import Floats2d

from ..annotation import ParagraphClipper, annotated_labels, same_tokens
from spacy.errors import Errors as SpacyErrors

from ..errors import Errors
from ..ml.batching import length_batches
from ..ml.crf import Mask, crf_decode, crf_loss
from ..ml.paragraphs import cut, paragraph_bounds
from ..ml.parallelism_tagger import predict_by_paragraph  # also registers ParallelismTagger.v1
from ..ml.tagging import TagScheme, parse_tag
from ..scorers.parallelism import score_parallelism
from ..spangroups import IN_PARAGRAPH, PARALLELISM_KEY, parallelism_offsets, set_parallelisms

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy_rhetoric.ParallelismTagger.v1"
hidden_width = 128
lstm_depth = 1
dropout = 0.1

[model.tok2vec]
@architectures = "spacy.Tok2Vec.v2"

[model.tok2vec.embed]
@architectures = "spacy.MultiHashEmbed.v2"
width = 96
attrs = ["NORM", "PREFIX", "SUFFIX"]
rows = [5000, 2500, 2500]
include_static_vectors = false

[model.tok2vec.encode]
@architectures = "spacy.MaxoutWindowEncoder.v2"
width = 96
depth = 2
window_size = 1
maxout_pieces = 3
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]

_TYPE_ORDER = {"O": 0, "M": 1, "B": 2, "I": 3, "J": 4, "E": 5, "L": 6}


def annotates_parallelism(doc: Doc) -> bool:
    """Whether ``doc``'s corpus annotates parallelisms (a doc that declares
    nothing annotates everything; see :mod:`spacy_rhetoric.annotation`)."""
    return "coarse/parallelism" in annotated_labels(doc)


#: Most padded word positions per prediction sub-batch (the BiLSTM and the
#: CRF run on zero-padded batches).
PAD_BUDGET = 8192


@Language.factory(
    "parallelism_linker",
    assigns=["doc.spans"],
    default_config={
        "model": DEFAULT_MODEL,
        "tagset": "BIOMJ",
        "link": "token",
        "constrain": True,
        "spans_key": PARALLELISM_KEY,
        "o_bias": 0.0,
        "scorer": {"@scorers": "spacy_rhetoric.parallelism_scorer.v1"},
    },
    default_score_weights={
        "parallelism_epm_f": 0.5,
        "parallelism_mbawo_f": 0.5,
        "parallelism_epm_p": None,
        "parallelism_epm_r": None,
        "parallelism_mpbm_p": None,
        "parallelism_mpbm_r": None,
        "parallelism_mpbm_f": 0.0,
        "parallelism_mbawo_p": None,
        "parallelism_mbawo_r": None,
        "parallelism_mwo_p": None,
        "parallelism_mwo_r": None,
        "parallelism_mwo_f": 0.0,
    },
)
def make_parallelism_linker(
    nlp: Language,
    name: str,
    model: Model[List[Doc], List[Floats2d]],
    tagset: str,
    link: str,
    constrain: bool,
    spans_key: str,
    o_bias: float,
    scorer: Optional[Callable],
) -> "ParallelismLinker":
    """Create a ``parallelism_linker``.

    tagset: one of BIO, BIOE, BIOJ, BIOM, BIOJE, BIOME, BIOMJ, BIOMJE.
    link: ``"token"`` or ``"branch"`` distance links (§6.1).
    constrain: forbid tag bigrams the scheme cannot produce in the CRF.
    spans_key: where branches are written (``doc.spans[spans_key]`` and
    ``spans_key_1``, ``spans_key_2``, ...).
    o_bias: subtracted from the ``O`` tag's emission score of every word
        before Viterbi decoding; above 0 the linker finds more branches
        (recall for precision). Chosen on dev by ``tune-thresholds-raw``.
    """
    return ParallelismLinker(nlp.vocab, model, name, tagset=tagset, link=link, constrain=constrain,
                             spans_key=spans_key, o_bias=o_bias, scorer=scorer)


class ParallelismLinker(TrainablePipe):
    """Detects parallelisms (排比) and groups their branches."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "parallelism_linker",
        *,
        tagset: str = "BIOMJ",
        link: str = "token",
        constrain: bool = True,
        spans_key: str = PARALLELISM_KEY,
        o_bias: float = 0.0,
        scorer: Optional[Callable] = score_parallelism,
    ) -> None:
        """Raises ValueError for an unknown tag set or link type."""
        self.vocab = vocab
        self.model = model
        self.name = name
        TagScheme(tagset, link)  # raises for an unknown tag set or link type
        self.cfg = {"labels": [], "tagset": tagset, "link": link, "constrain": constrain, "spans_key": spans_key,
                    "o_bias": float(o_bias)}
        self.scorer = scorer
        self._mask_cache: Tuple[tuple, Optional[Mask]] = ((), None)

    @property
    def labels(self) -> Tuple[str, ...]:
        """The tag strings, in output-layer order."""
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    @property
    def spans_key(self) -> str:
        return self.cfg["spans_key"]

    @property
    def scheme(self) -> TagScheme:
        """The tagging scheme, from ``cfg`` (so ``from_disk`` can never
        leave it disagreeing with the saved tag set and link type)."""
        key = (self.cfg["tagset"], self.cfg["link"])
        if getattr(self, "_scheme", None) is None or self._scheme[0] != key:
            self._scheme = (key, TagScheme(*key))
        return self._scheme[1]

    def _mask(self) -> Optional[Mask]:
        if not self.cfg["constrain"]:
            return None
        key = (self.labels, self.cfg["tagset"], self.cfg["link"])
        if self._mask_cache[0] != key:
            self._mask_cache = (key, self.scheme.transition_mask(self.labels))
        return self._mask_cache[1]

    def predict(self, docs: Iterable[Doc]) -> List[List[int]]:
        """Viterbi tag ids per doc (an empty doc gets ``[]``)."""
        docs = list(docs)
        paths: List[List[int]] = [[] for _ in docs]
        nonempty = [i for i, d in enumerate(docs) if len(d)]
        if not nonempty:
            return paths
        if self._listens():
            # a listener (shared tok2vec or transformer) accepts only the
            # whole batch its upstream component saw: no sub-batches
            bounds = [paragraph_bounds(doc) for doc in docs]
            emissions = predict_by_paragraph(self.model, docs, bounds)
            decoded = self._decode([docs[i] for i in nonempty], [emissions[i] for i in nonempty], [bounds[i] for i in nonempty])
            for i, path in zip(nonempty, decoded):
                paths[i] = path
            return paths
        for chunk in length_batches(nonempty, [len(d) for d in docs], PAD_BUDGET):
            bounds = [paragraph_bounds(docs[i]) for i in chunk]
            emissions = predict_by_paragraph(self.model, [docs[i] for i in chunk], bounds)
            for i, path in zip(chunk, self._decode([docs[i] for i in chunk], emissions, bounds)):
                paths[i] = path
        return paths

    def _decode(
        self, docs: List[Doc], emissions: List[Floats2d], bounds: Optional[List[List[Tuple[int, int]]]] = None
    ) -> List[List[int]]:
        """Viterbi paths, each paragraph of a doc decoded on its own (the
        training docs are single paragraphs: no tag sequence, and so no
        link, runs across a line break). ``bounds``: the docs'
        :func:`paragraph_bounds`, when the caller has them already."""
        if bounds is None:
            bounds = [paragraph_bounds(doc) for doc in docs]
        pieces = self._biased(cut(emissions, bounds))
        owners = [k for k, doc_bounds in enumerate(bounds) for _ in doc_bounds]
        decoded = crf_decode(self.model.get_ref("crf"), pieces, self._mask())
        paths: List[List[int]] = [[] for _ in bounds]
        for k, path in zip(owners, decoded):
            paths[k].extend(path)
        return paths

    def _biased(self, emissions: List[Floats2d]) -> List[Floats2d]:
        """``emissions`` (Floats2d (n_words, n_tags) each) with ``o_bias``
        subtracted from the ``O`` column: the "extractor tweaking" of Minkov
        et al. 2006 (NER Systems that Suit User's Preferences: Adjusting the
        Recall-Precision Trade-off for Entity Extraction, HLT-NAACL), which
        trades precision for recall at decoding, without retraining."""
        bias = float(self.cfg.get("o_bias", 0.0))
        if not bias or "O" not in self.labels:
            return emissions
        shift = self.model.ops.alloc1f(len(self.labels))
        shift[self.labels.index("O")] = bias
        return [e - shift for e in emissions]

    def _listens(self) -> bool:
        """Whether the encoder reads a shared upstream component."""
        return any(hasattr(node, "upstream_name") for node in self.model.walk())

    def set_annotations(self, docs: Iterable[Doc], tag_ids: List[List[int]]) -> None:
        """Decode tags to parallelisms and write them to each doc's span
        groups; branches are clipped to one paragraph without whitespace at
        their edges (:func:`spacy_rhetoric.annotation.clip_to_paragraph`) and
        a parallelism left with fewer than two branches is dropped."""
        labels = self.labels
        for doc, ids in zip(docs, tag_ids):
            groups = []
            clip = ParagraphClipper(doc)
            for group in self.scheme.decode([labels[i] for i in ids]):
                # a line break ends a paragraph: no branch crosses one
                branches = [b for b in (clip(start, end) for start, end in group) if b]
                if len(branches) >= 2:
                    groups.append(branches)
            set_parallelisms(doc, groups, key=self.spans_key)

    def _gold_groups(self, eg: Example) -> List[List[Tuple[int, int]]]:
        """Gold parallelisms (>= 2 branches) in the predicted doc's tokens."""
        ref = parallelism_offsets(eg.reference, self.spans_key, IN_PARAGRAPH)
        if same_tokens(eg):
            return [g for g in ref if len(g) >= 2]
        groups = []
        for group in ref:
            spans = [eg.reference[s:e] for s, e in group]
            aligned = sorted({(s.start, s.end) for s in eg.get_aligned_spans_y2x(spans, allow_overlap=True)})
            if len(aligned) >= 2:
                groups.append(aligned)
        return groups

    def _gold_ids(self, eg: Example) -> List[int]:
        """Tag ids of the gold tags; a link unseen in training maps to the
        known link of the same sign nearest to it (so training never fails on
        a rare link)."""
        tags = self.scheme.encode(self._gold_groups(eg), len(eg.predicted))
        index = {t: i for i, t in enumerate(self.labels)}
        links = sorted((parse_tag(t)[1], t) for t in self.labels if parse_tag(t)[0] == "L")
        ids = []
        for tag in tags:
            if tag not in index:
                typ, value = parse_tag(tag)
                if typ != "L" or not links:
                    raise ValueError(Errors.R102.format(tag=tag, name=self.name))
                tag = min(links, key=lambda lv: abs(lv[0] - value))[1]
            ids.append(index[tag])
        return ids

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        """CRF negative log-likelihood of the gold tags (summed over docs) and
        its gradient w.r.t. the emissions, List[Floats2d] (n_words, n_tags);
        also accumulates the CRF transition gradients."""
        validate_examples(examples, "ParallelismLinker.get_loss")
        gold = [self._gold_ids(eg) for eg in examples]
        return crf_loss(self.model.get_ref("crf"), scores, gold, self._mask())

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd=None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch of Examples. Empty docs, and docs whose corpus
        does not annotate parallelism (``annotates_parallelism``), are
        skipped: a simile sentence without branches is not a negative."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        validate_examples(examples, "ParallelismLinker.update")
        examples = list(examples)
        keep = [i for i, eg in enumerate(examples) if len(eg.predicted) and annotates_parallelism(eg.reference)]
        if not keep:
            return losses
        set_dropout_rate(self.model, drop)
        if self._listens():
            # the listener needs the whole batch; skipped docs get no gradient
            scores, backprop = self.model.begin_update([eg.predicted for eg in examples])
            loss, d_kept = self.get_loss([examples[i] for i in keep], [scores[i] for i in keep])
            d_scores = [self.model.ops.alloc2f(*s.shape) for s in scores]
            for i, d in zip(keep, d_kept):
                d_scores[i] = d
        else:
            scores, backprop = self.model.begin_update([examples[i].predicted for i in keep])
            loss, d_scores = self.get_loss([examples[i] for i in keep], scores)
        backprop(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> None:
        """Collect the tag set from the training data (or take ``labels``),
        size the output layer and CRF, and initialise the model.

        Raises ValueError if ``get_examples`` yields no Example.
        """
        validate_get_examples(get_examples, "ParallelismLinker.initialize")
        if labels is None:
            found = {"O", "B", "I"}
            for eg in get_examples():
                if annotates_parallelism(eg.reference):
                    found.update(self.scheme.encode(self._gold_groups(eg), len(eg.predicted)))
            labels = found
        for tag in labels:
            parse_tag(tag)
        self.cfg["labels"] = sorted(set(labels), key=lambda t: (_TYPE_ORDER[parse_tag(t)[0]], -(parse_tag(t)[1] or 0)))
        n_tags = len(self.labels)
        self.model.get_ref("output_layer").set_dim("nO", n_tags)
        self.model.get_ref("crf").set_dim("nO", n_tags)
        sample = [eg.predicted for eg in islice(get_examples(), 10) if len(eg.predicted)]
        if not sample:
            raise ValueError(Errors.R101.format(name=self.name))
        self.model.initialize(X=sample)

    def add_label(self, label: str) -> int:
        raise NotImplementedError(SpacyErrors.E931.format(parent="ParallelismLinker", method="add_label", name=self.name))
