"""``rhetoric tune ...``: settings chosen on dev: the decision thresholds (raw text) and the verifier's object thresholds."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail_on, tune_app


@tune_app.command("thresholds")
def tune_thresholds_raw_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline folder"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the chosen thresholds (may be MODEL)"),
    corpus: List[str] = typer.Option(["pse-i-cerd", "simile"], "--corpus", "-c", help="Dev corpora read as raw text (their dev split; never test)"),
    shared: Path = typer.Option(Path("../shared/data"), "--shared", help="Folder with pse-i/, simile/, cmc/"),
    annotations: Path = typer.Option(Path("annotations/pse-i-cerd"), "--annotations", help="Folder with the team annotation"),
    min_support: int = typer.Option(10, "--min-support", help="Tune only devices with this many dev units"),
    tolerance: float = typer.Option(0.01, "--tolerance", help="Take the threshold nearest 0.5 whose dev F1 is within this of the best"),
    components: bool = typer.Option(True, "--components/--no-components", help="Also tune rhetoric_components per label"),
    linker_bias: bool = typer.Option(True, "--linker-bias/--no-linker-bias", help="First tune parallelism_linker's o_bias (EPM and MBAWO F1 on the dev essays)"),
) -> None:
    """parallelism_linker's o_bias, then one rhetoric_textcat threshold per
    coarse device, then one rhetoric_components threshold per component
    label, chosen on the dev splits read as raw text (the user's path,
    linker rule included)."""
    from wasabi import msg

    from ..evaluation.raw_path import read_gold, tune_component_thresholds_raw, tune_linker_bias_raw, tune_thresholds_raw
    from ..packaging import write_component
    from ..analysis.loading import load_pipeline

    nlp = load_pipeline(model)
    devs = [read_gold(c, shared, annotations, "dev") for c in corpus]
    names = []
    if linker_bias and "parallelism_linker" in nlp.pipe_names:
        r = tune_linker_bias_raw(nlp, devs)
        grid = ", ".join(f"{b:.2f}: {f:.4f}" for b, f in r["grid"].items())
        msg.info(f"parallelism_linker: o_bias {r['o_bias']:.2f} -> dev (EPM F1 + MBAWO F1) / 2 = {r['f']:.4f} ({r['texts']} dev texts; {grid})")
        names.append("parallelism_linker")
    for label, r in tune_thresholds_raw(nlp, devs, min_support=min_support, tolerance=tolerance).items():
        msg.info(f"coarse/{label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev units)")
    names.append("rhetoric_textcat")
    if components and "rhetoric_components" in nlp.pipe_names:
        for label, r in tune_component_thresholds_raw(nlp, devs, min_support=min_support, tolerance=tolerance).items():
            msg.info(f"component {label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev spans)")
        names.append("rhetoric_components")
    # only these components' settings change: every other file stays as it is
    for name in names:
        write_component(model, output, nlp, name)
        model = output
    msg.good(f"wrote {output}")


@tune_app.command("object-thresholds")
def tune_object_thresholds_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline folder that verifies"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the chosen threshold (may be MODEL)"),
    requests: Path = typer.Option(Path("corpus/rg/essays_dev.jsonl"), "--requests", exists=True, dir_okay=False, help="Dev requests with their human sentences (never test)"),
    device: str = typer.Option("personification", "--device", help="Device whose object threshold is chosen"),
    min_precision: float = typer.Option(0.8, "--min-precision", help="Take the lowest threshold whose precision on the dev pairs reaches this"),
    n_context: int = typer.Option(2, "--n-context", help="Context sentences before each human sentence (the generator config's n_context)"),
    report: Optional[Path] = typer.Option(None, "--report", help="JSON file for the table of every threshold tried"),
) -> None:
    """Choose rhetoric_components' object threshold for DEVICE: the
    threshold a span named by a suggestion request must reach to count as
    the device's object, chosen on the dev essays' human sentences
    (spacy_rhetoric.research.object_thresholds)."""
    import json

    from wasabi import msg

    from ..research.object_thresholds import COMPONENTS_ALONE, choose, labelled_pairs, score_pairs, sweep
    from ..llm.records import read_jsonl
    from ..packaging import write_component
    from ..analysis.loading import load_pipeline
    from ..taxonomy import OBJECT_COMPONENT

    if not 0.0 < min_precision <= 1.0:
        msg.fail(f"--min-precision must be in (0, 1], got {min_precision}", exits=1)
    with _fail_on(ValueError):
        pairs = labelled_pairs(list(read_jsonl(requests)), device)
    nlp = load_pipeline(model)
    label = OBJECT_COMPONENT[device]
    table = sweep(score_pairs(nlp, pairs, device, n_context))
    chosen = choose(table, min_precision)
    names = {t: "components_alone" if t == COMPONENTS_ALONE else f"{t:.2f}" for t in table}
    for t, row in table.items():
        msg.text(f"{names[t]}: P {row['p']:.3f} R {row['r']:.3f} F1 {row['f']:.3f} (tp {row['tp']}, fp {row['fp']}, fn {row['fn']})")
    comp = nlp.get_pipe("rhetoric_components")
    kept = {k: v for k, v in comp.cfg.get("object_thresholds", {}).items() if k != label}
    if chosen == COMPONENTS_ALONE:
        msg.warn(f"no threshold reaches precision {min_precision}; {label} keeps its components alone")
    else:
        kept[label] = chosen
    comp.cfg["object_thresholds"] = kept
    write_component(model, output, nlp, "rhetoric_components")
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"model": str(model), "requests": str(requests), "device": device, "label": label,
                                      "pairs": len(pairs), "positives": sum(g for _, g in pairs), "min_precision": min_precision,
                                      "chosen": None if chosen == COMPONENTS_ALONE else chosen,
                                      "table": {names[t]: row for t, row in table.items()}},
                                     indent=1), encoding="utf8")
    msg.good(f"{label}: object threshold {'none' if chosen == COMPONENTS_ALONE else f'{chosen:.2f}'} -> wrote {output}")
