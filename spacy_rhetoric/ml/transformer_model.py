"""The transformer encoder without padding waste.

``spacy-transformers.TransformerModel.v3`` tokenizes every span of a batch
(for our pipelines: one per paragraph window) into one tensor padded to the
longest span, and runs the encoder on it. Essays mix one-line paragraphs
with 300-wordpiece ones: on the first 8 PSE-I test essays 81% of the
positions the encoder computed were padding, and attention costs grow with
the square of the padded length.

``spacy_rhetoric.LengthBatchedTransformerModel.v1`` is TransformerModel.v3
(same settings, same weights on disk) whose encoder, in prediction and in
training, regroups the spans: each padded row is cut to its real
length and the rows run in sub-batches of similar length, at most ``batch_tokens`` padded
positions each (``0``: each span alone), then the hidden states are put
back where TransformerModel.v3 expects them (padding positions are zeros,
which nothing reads: the alignment to words only uses real wordpieces).
With right padding and an attention mask this gives the same hidden states
up to floating-point rounding; with ``batch_tokens = 0`` a span's states
do not even depend on the other spans of the batch. Optionally
(``int8_on_cpu``) the sub-batches run on a CPU through the int8 copy of the
encoder (:mod:`spacy_rhetoric.ml.quantized_transformer`). In prediction on
a CPU the encoder runs on ``cpu_threads`` torch threads however few the
caller set (:func:`spacy_rhetoric.runtime.threads.encoder_threads`).

In training the gradients flow back through the regrouping to the same
parameters, so an update is TransformerModel.v3's up to rounding (dropout
aside); one update of the shipped pipeline on PSE-I CERD batches of 1,500
words took about 3 s instead of 5-13 s on this CPU (6 updates
each, timed once). The int8 copy is for prediction only.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model

from ..errors import Errors
from ..runtime.threads import encoder_threads, torch_threads
from .batching import length_batches
from .quantized_transformer import on_cpu, quantized_copy

#: Fields of a Hugging Face model output that are (rows, length, width).
_PER_POSITION = ("last_hidden_state", "hidden_states")
#: Fields that are (rows, width).
_PER_ROW = ("pooler_output",)


def _right_padded_lengths(attention_mask) -> Optional[List[int]]:
    """Real length of each row of an (n_rows, length) 0/1 mask, or None
    when some row is not right-padded (its ones are not a prefix)."""
    lengths = attention_mask.sum(dim=1)
    positions = attention_mask.new_ones(attention_mask.shape).cumsum(dim=1)
    prefix = (positions <= lengths.unsqueeze(1)).to(attention_mask.dtype)
    if not bool((prefix == attention_mask).all()):
        return None
    return [int(n) for n in lengths]


def _put_rows(target, rows: List[int], value) -> None:
    """Write ``value`` (len(rows), n, ...) into ``target[rows, :n]``, or,
    for a per-row field, (len(rows), width) into ``target[rows]``."""
    import torch

    index = torch.tensor(rows, dtype=torch.long, device=target.device)
    if target.dim() == 2:
        target[index] = value
    else:
        target[index, : value.shape[1]] = value


class LengthBatchedEncoder:
    """Callable in place of the Hugging Face module (prediction and
    training; module docstring): runs ``encoder`` on sub-batches of rows of similar length, each cut to its
    longest real row, and returns the output for the whole padded batch.

    encoder: the torch module (float or int8) called with ``input_ids``,
    ``attention_mask`` and optionally ``token_type_ids``, each a LongTensor
    (n_rows, length). Returns the encoder's own output class whose
    ``last_hidden_state`` is Floats3d (n_rows, length, width), zeros at
    padding. Raises ValueError (R206) for an output field other than
    last_hidden_state, hidden_states and pooler_output.
    """

    def __init__(self, encoder: Any, batch_tokens: int) -> None:
        self.encoder = encoder
        self.batch_tokens = batch_tokens

    # PyTorchShim.predict switches the module it calls to eval and back
    def eval(self) -> "LengthBatchedEncoder":
        self.encoder.eval()
        return self

    def train(self, mode: bool = True) -> "LengthBatchedEncoder":
        self.encoder.train(mode)
        return self

    def __call__(self, *args, **kwargs):
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids")
        if args or ids is None or mask is None or ids.shape[0] < 2:
            return self.encoder(*args, **kwargs)
        lengths = _right_padded_lengths(mask)
        if lengths is None:
            return self.encoder(*args, **kwargs)
        n_rows, n_positions = ids.shape
        merged: Dict[str, Any] = {}
        output_type = None
        for rows in length_batches(range(n_rows), lengths, self.batch_tokens):
            longest = max(lengths[i] for i in rows)
            sub = {k: (v[rows, :longest] if hasattr(v, "shape") and tuple(v.shape) == (n_rows, n_positions) else v)
                   for k, v in kwargs.items()}
            out = self.encoder(**sub)
            output_type = type(out)
            for field, value in out.items():
                merged.setdefault(field, _empty_like(field, value, n_rows, n_positions))
                if field == "hidden_states":
                    for target, layer in zip(merged[field], value):
                        _put_rows(target, rows, layer)
                else:
                    _put_rows(merged[field], rows, value)
        # a short row in a sub-batch got states at its padding: zero them, as promised
        padding = (mask == 0).unsqueeze(-1)
        for states in [merged["last_hidden_state"], *merged.get("hidden_states", ())]:
            states.masked_fill_(padding, 0.0)
        return output_type(**merged)


def _empty_like(field: str, value, n_rows: int, n_positions: int):
    """Zeros for a whole-batch output field (see LengthBatchedEncoder)."""
    if field == "hidden_states":
        return tuple(layer.new_zeros((n_rows, n_positions, *layer.shape[2:])) for layer in value)
    if field in _PER_POSITION:
        return value.new_zeros((n_rows, n_positions, *value.shape[2:]))
    if field in _PER_ROW:
        return value.new_zeros((n_rows, *value.shape[1:]))
    raise ValueError(Errors.R206.format(field=field))


def wrap_forward(float_forward: Callable, *, batch_tokens: Optional[int], int8_on_cpu: bool,
                 cpu_threads: int = 0) -> Callable:
    """TransformerModel.v3's forward whose encoder runs by length
    (``batch_tokens`` not None: in training too, where the gradients flow
    through the regrouping) and, in prediction on a CPU, int8
    (``int8_on_cpu``) on ``cpu_threads`` torch threads
    (:func:`spacy_rhetoric.runtime.threads.encoder_threads`); with none of them
    it is ``float_forward`` as it is."""
    def forward(model: Model, docs: List[Doc], is_train: bool):
        shim = model.layers[0].shims[0]
        module = shim._model
        if module is None:
            return float_forward(model, docs, is_train)
        predict_on_cpu = not is_train and on_cpu(module)
        with torch_threads(encoder_threads(cpu_threads) if predict_on_cpu else None):
            encoder = quantized_copy(module) if int8_on_cpu and predict_on_cpu else module
            if batch_tokens is not None:
                encoder = LengthBatchedEncoder(encoder, batch_tokens)
            if encoder is module:
                return float_forward(model, docs, is_train)
            # the backprop callback uses torch's graph, not shim._model: restoring is safe
            shim._model = encoder
            try:
                return float_forward(model, docs, is_train)
            finally:
                shim._model = module

    return forward


@registry.architectures("spacy_rhetoric.LengthBatchedTransformerModel.v1")
def create_length_batched_transformer_model(
    name: str,
    get_spans: Callable,
    tokenizer_config: Dict[str, Any] = {},
    transformer_config: Dict[str, Any] = {},
    mixed_precision: bool = False,
    grad_scaler_config: Dict[str, Any] = {},
    batch_tokens: int = 0,
    int8_on_cpu: bool = False,
    cpu_threads: int = 0,
) -> Model:
    """``spacy-transformers.TransformerModel.v3`` (the same arguments)
    whose encoder runs by length (module docstring).

    batch_tokens: most padded wordpiece positions per sub-batch of spans
    (rows x longest row); 0 runs each span alone. int8_on_cpu: predict on a
    CPU with the int8 copy of the encoder. cpu_threads: torch threads of
    that prediction in the main process, whatever the caller set (-1: this
    machine's cores, 0: the caller's setting); a forked ``n_process``
    worker keeps its one thread. Raises ValueError (R205) for a negative
    ``batch_tokens`` and (R207) for ``cpu_threads`` below -1. Returns the
    TransformerModel, so listeners, ``replace_listeners`` and serialisation
    work as for v3.
    """
    if batch_tokens < 0:
        raise ValueError(Errors.R205.format(value=batch_tokens))
    if cpu_threads < -1:
        raise ValueError(Errors.R207.format(value=cpu_threads))
    return wrapped_transformer_model((name, get_spans, tokenizer_config, transformer_config, mixed_precision,
                                      grad_scaler_config), batch_tokens=int(batch_tokens), int8_on_cpu=bool(int8_on_cpu),
                                     cpu_threads=int(cpu_threads))


def wrapped_transformer_model(v3_args: tuple, *, batch_tokens: Optional[int], int8_on_cpu: bool,
                              cpu_threads: int = 0) -> Model:
    """TransformerModel.v3 built from ``v3_args`` (its positional arguments)
    with its forward wrapped by :func:`wrap_forward`."""
    from spacy_transformers.architectures import create_TransformerModel_v3

    model = create_TransformerModel_v3(*v3_args)
    # settings of the config, not of the saved weights: kept out of
    # model.attrs, which thinc serialises and from_disk would restore
    model._func = wrap_forward(model._func, batch_tokens=batch_tokens, int8_on_cpu=int8_on_cpu,
                               cpu_threads=cpu_threads)
    return model


@registry.architectures("spacy_rhetoric.QuantizedTransformerModel.v1")
def create_quantized_transformer_model(
    name: str,
    get_spans: Callable,
    tokenizer_config: Dict[str, Any] = {},
    transformer_config: Dict[str, Any] = {},
    mixed_precision: bool = False,
    grad_scaler_config: Dict[str, Any] = {},
    int8_on_cpu: bool = True,
) -> Model:
    """``spacy-transformers.TransformerModel.v3`` (the same arguments) whose
    prediction on a CPU runs int8 linear layers when ``int8_on_cpu``
    (:mod:`spacy_rhetoric.ml.quantized_transformer`), padded as v3 pads.
    Returns the TransformerModel, so listeners,
    ``replace_listeners`` and serialisation work as for v3."""
    return wrapped_transformer_model((name, get_spans, tokenizer_config, transformer_config, mixed_precision,
                                      grad_scaler_config), batch_tokens=None, int8_on_cpu=bool(int8_on_cpu))
