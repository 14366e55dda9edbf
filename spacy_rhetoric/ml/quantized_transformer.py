"""The transformer encoder run with int8 weights on a CPU: the int8 copy.

``spacy_rhetoric.QuantizedTransformerModel.v1`` (registered in
:mod:`spacy_rhetoric.ml.transformer_model`, with ``int8_on_cpu`` of
``LengthBatchedTransformerModel.v1``) is
``spacy-transformers.TransformerModel.v3`` (same settings, same weights on
disk, same training) whose *prediction* on a CPU runs a copy of the Hugging
Face model with torch's dynamic int8 quantisation of every ``nn.Linear``
(``torch.ao.quantization.quantize_dynamic``: weights stored as int8,
activations quantised per batch on the fly). Training, serialisation and
prediction on a GPU use the float model unchanged, so a pipeline switches
between the two by this one architecture name (or ``int8_on_cpu``), and the
quantised copy is rebuilt whenever the float weights change (after
``from_disk`` or an update). torch 2.13 marks ``torch.ao.quantization`` as
moving to torchao; torchao is not a dependency here, and the tests check
that the torch API still gives the int8 model.

Why: on a 2-core CPU the encoder's linear layers are about half of the
pipeline's time (``docs/service.md``); int8 matrix products are 2-3x faster
there. Outputs differ from the float model's within quantisation error; the
raw-path figures of both are in ``docs/evaluation.md``.
"""
from __future__ import annotations

import copy
import warnings
import weakref
from typing import Any

#: float module -> its int8 copy and the parameter versions it was made from
_QUANTIZED: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _version(module) -> tuple:
    """A fingerprint of ``module``'s weights: the sum of each parameter.
    thinc's optimiser writes updates into the parameters' storage without
    torch's version counter seeing it, so the values themselves are read
    (about 10 ms for the 15 M parameters of RoFormer-Sim small)."""
    import torch

    with torch.no_grad():
        return tuple(float(p.detach().double().sum()) for p in module.parameters())


def quantized_copy(module):
    """The int8 copy of a float torch module (cached until its parameters
    change): every ``nn.Linear`` dynamically quantised to ``qint8``."""
    import torch

    cached = _QUANTIZED.get(module)
    version = _version(module)
    if cached is None or cached[0] != version:
        float_copy = copy.deepcopy(module).float().eval()
        with warnings.catch_warnings():
            # torch 2.13 marks torch.ao.quantization as moving to torchao, which
            # is not a dependency here; the API still works and is tested
            warnings.simplefilter("ignore", (DeprecationWarning, UserWarning))
            quantized = torch.ao.quantization.quantize_dynamic(float_copy, {torch.nn.Linear}, dtype=torch.qint8)
        cached = (version, quantized)
        _QUANTIZED[module] = cached
    return cached[1]


def on_cpu(module) -> bool:
    """Whether every parameter of a torch module is on the CPU."""
    return all(p.device.type == "cpu" for p in module.parameters())
