"""Frozen Gemma 3 270M sentence features with one logistic regression per
coarse device, scored on the raw path against (and averaged with)
`zh_rhetoric`'s sentence classifier. An experiment, not a component; the
result is in docs/experiments.md ("Representations for personification").

Features: the hidden states of layers 6, 12 and 18 of Gemma 3 270M (18
layers, width 640; `spacy project run generator-model`), each mean-pooled
over the sentence's tokens (BOS left out) and concatenated: 1,920 floats per
sentence. The regressions (scikit-learn, standardised features,
class_weight "balanced") learn from PSE-I CERD train gold sentences (every
sentence with a device, and a sample of literal ones) and, for hyperbole
only, HYPO-cn's training split.

Scoring: the pipeline PIPE (a copy of `zh_rhetoric` with its thresholds
chosen on PSE-I CERD dev) reads the dev essays as raw text; in its
`rhetoric_textcat` the four coarse probabilities of each sentence it finds
are replaced by the regression's (`--weight 1`) or averaged with them
(`--weights 0.5`); for each weight the thresholds are chosen on PSE-I CERD
dev (`tune_thresholds_raw`) and the figures come from `evaluate_raw`
(`OUT/gemma_probe_w{weight}[_seed{seed}].dev.json`, with the regression's
settings and the feature speed under "probe"). `--seed` draws another
sample of literal and HYPO-cn sentences.

    env OMP_NUM_THREADS=1 python configs/experiments/gemma_probe.py PIPE \
        --weights 0.5 0.3 0.7 1.0 --corpora pse-i-cerd hypo-cn \
        --out metrics/representations --cache /tmp/gemma_cache
"""
from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Dict, List, Sequence

import numpy

DEVICES = ("metaphor", "personification", "hyperbole", "parallelism")
LAYERS = (6, 12, 18)


class Features:
    """Mean-pooled Gemma hidden states of sentences, cached on disk by text."""

    def __init__(self, model_dir: Path, cache: Path, batch_size: int = 16):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(1)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
        self.batch_size = batch_size
        self.cache_path = Path(cache) / "gemma_features.npz"
        self.cache: Dict[str, numpy.ndarray] = {}
        if self.cache_path.is_file():
            data = numpy.load(self.cache_path, allow_pickle=False)
            self.cache = dict(zip(data["texts"].tolist(), data["vectors"]))
        self.seconds = 0.0
        self.computed = 0

    def save(self) -> None:
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        texts = list(self.cache)
        numpy.savez(self.cache_path, texts=numpy.array(texts), vectors=numpy.stack([self.cache[t] for t in texts]))

    def __call__(self, texts: Sequence[str]) -> numpy.ndarray:
        todo = sorted({t for t in texts if t not in self.cache}, key=len)
        t0 = time.perf_counter()
        with self.torch.inference_mode():
            for i in range(0, len(todo), self.batch_size):
                batch = todo[i:i + self.batch_size]
                enc = self.tokenizer(batch, return_tensors="pt", padding=True, truncation=True, max_length=256)
                # the decoder stack only (Gemma3ForCausalLM.model): no logits over the 262k vocabulary
                out = self.model.model(**enc, output_hidden_states=True)
                mask = enc["attention_mask"].clone()
                # leave out BOS (the first non-pad position of each row)
                first = mask.float().argmax(dim=1)
                mask[self.torch.arange(mask.shape[0]), first] = 0
                mask = mask.unsqueeze(-1).float()
                pooled = [(out.hidden_states[layer] * mask).sum(1) / mask.sum(1).clamp(min=1) for layer in LAYERS]
                vectors = self.torch.cat(pooled, dim=-1).numpy()
                for text, vector in zip(batch, vectors):
                    self.cache[text] = vector.astype("float32")
                if (i // self.batch_size) % 25 == 24:
                    print(f"features: {i + len(batch)} of {len(todo)} in {time.perf_counter() - t0:.0f} s", flush=True)
                    self.save()
        self.seconds += time.perf_counter() - t0
        self.computed += len(todo)
        dim = 640 * len(LAYERS)
        return numpy.stack([self.cache[t] for t in texts]) if texts else numpy.zeros((0, dim), dtype="float32")


def training_sentences(shared: Path, annotations: Path, n_literal: int, seed: int):
    """(texts, {device: labels}) from PSE-I CERD train gold units."""
    from spacy_rhetoric.evaluation.raw_path import read_gold

    texts, labels = [], []
    for g in read_gold("pse-i-cerd", shared, annotations, "train"):
        for u in g.units:
            text = g.text[u.start:u.end].strip()
            if text:
                texts.append(text)
                labels.append(set(u.labels.get("coarse", ())))
    rng = random.Random(seed)
    positive = [i for i, lab in enumerate(labels) if lab & set(DEVICES)]
    literal = [i for i, lab in enumerate(labels) if not lab & set(DEVICES)]
    keep = sorted(positive + rng.sample(literal, min(n_literal, len(literal))))
    return [texts[i] for i in keep], {d: numpy.array([d in labels[i] for i in keep]) for d in DEVICES}


def hypo_cn_train(shared: Path, n_each: int, seed: int):
    rng = random.Random(seed)
    out = []
    for name, label in (("train.1", True), ("train.0", False)):
        lines = [s.strip() for s in (shared / "hypo-cn" / name).read_text(encoding="utf8").splitlines() if s.strip()]
        out += [(s, label) for s in rng.sample(lines, min(n_each, len(lines)))]
    return [s for s, _ in out], numpy.array([y for _, y in out])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("pipeline", type=Path)
    ap.add_argument("--model", type=Path, default=Path("assets/generators/gemma-3-270m"))
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--annotations", type=Path, default=Path("annotations/pse-i-cerd"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/gemma_cache"))
    ap.add_argument("--out", type=Path, default=Path("metrics/representations"))
    ap.add_argument("--n-literal", type=int, default=1000)
    ap.add_argument("--hypo-cn-each", type=int, default=300)
    ap.add_argument("--weights", type=float, nargs="+", default=[1.0, 0.5])
    ap.add_argument("--corpora", nargs="+", default=["pse-i-cerd"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="gemma_probe", help="metrics file name prefix")
    args = ap.parse_args()

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from spacy_rhetoric.evaluation.raw_path import evaluate_raw, read_gold, tune_thresholds_raw
    from spacy_rhetoric.analysis.loading import load_pipeline

    feats = Features(args.model, args.cache)
    texts, labels = training_sentences(args.shared, args.annotations, args.n_literal, args.seed)
    X = feats(texts)
    h_texts, h_y = hypo_cn_train(args.shared, args.hypo_cn_each, args.seed)
    Xh = feats(h_texts) if len(h_texts) else numpy.zeros((0, X.shape[1]), dtype="float32")
    feats.save()
    print(f"train sentences {len(texts)} (+ HYPO-cn {len(h_texts)}); positives "
          + ", ".join(f"{d} {int(labels[d].sum())}" for d in DEVICES)
          + f"; features {feats.computed} sentences in {feats.seconds:.0f} s", flush=True)
    probes = {}
    for d in DEVICES:
        Xd, yd = (numpy.vstack([X, Xh]), numpy.concatenate([labels[d], h_y])) if d == "hyperbole" else (X, labels[d])
        probes[d] = make_pipeline(StandardScaler(), LogisticRegression(C=0.05, class_weight="balanced", max_iter=3000)).fit(Xd, yd)

    nlp = load_pipeline(args.pipeline)
    textcat = nlp.get_pipe("rhetoric_textcat")
    shipped_thresholds = dict(textcat.cfg.get("thresholds") or {})
    original_predict = textcat.predict
    col = {key: i for i, key in enumerate(textcat.labels)}
    state = {"weight": 1.0}

    def predict(docs):
        docs = list(docs)
        indices, scores = original_predict(docs)
        scores = textcat.model.ops.to_numpy(scores).copy()
        spans = textcat.model.ops.to_numpy(indices.dataXd)
        lengths = textcat.model.ops.to_numpy(indices.lengths)
        sents, row = [], 0
        for doc, n in zip(docs, lengths):
            for start, end in spans[row:row + int(n)]:
                sents.append(doc[int(start):int(end)].text.strip() or doc[int(start):int(end)].text)
            row += int(n)
        if sents:
            Z = feats(sents)
            w = state["weight"]
            for d in DEVICES:
                c = col[f"coarse/{d}"]
                scores[:, c] = w * probes[d].predict_proba(Z)[:, 1] + (1 - w) * scores[:, c]
        return indices, textcat.model.ops.asarray2f(scores)

    textcat.predict = predict
    dev = read_gold("pse-i-cerd", args.shared, args.annotations, "dev")
    args.out.mkdir(parents=True, exist_ok=True)
    for w in args.weights:
        state["weight"] = w
        textcat.cfg["thresholds"] = dict(shipped_thresholds)
        chosen = tune_thresholds_raw(nlp, [dev])
        before = feats.seconds, feats.computed
        name = f"{args.name}_w{w:g}" + (f"_seed{args.seed}" if args.seed else "")
        result = evaluate_raw(nlp, args.corpora, shared=args.shared, annotations=args.annotations, split="dev",
                              output=args.out / f"{name}.dev.json")
        result["probe"] = {"weight": w, "layers": list(LAYERS), "train_sentences": len(texts),
                           "hypo_cn_train": len(h_texts), "thresholds": {k: v["threshold"] for k, v in chosen.items()},
                           "features_seconds_total": round(feats.seconds, 1), "sentences_featurised_total": feats.computed,
                           "speed_sentences_per_s": round(feats.computed / feats.seconds, 2) if feats.seconds else None}
        (args.out / f"{name}.dev.json").write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf8")
        cerd = result["corpora"]["pse-i-cerd"]["raw"]["sentences"]["all"]
        print(name, {d: round(cerd["sents_coarse_per_type"].get(d, {}).get("f", float("nan")), 3) for d in DEVICES},
              "micro", round(cerd.get("sents_coarse_micro_f", float("nan")), 3), result["probe"], flush=True)
        feats.save()


if __name__ == "__main__":
    main()
