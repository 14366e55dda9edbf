"""The spaCy project: `spacy project run train` is the advertised way to
train the default pipeline, so it must exist and name only real commands."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import srsly

ROOT = Path(__file__).resolve().parents[1]


def test_train_workflow_exists_and_names_commands():
    project = srsly.read_yaml(ROOT / "project.yml")
    commands = {c["name"] for c in project["commands"]}
    assert "train" not in commands, "one name, one meaning: `train` is the workflow"
    steps = project["workflows"]["train"]
    assert set(steps) <= commands
    # the separately trained cross-paragraph linker exists before the pipeline
    # is finalised (sourced in, then thresholds tuned with it in place)
    assert steps.index("convert-pse-original") < steps.index("train-cross-paragraph") < steps.index("finalize-zh-rhetoric")
    # the component head is retrained on the finalised pipeline, then tuned again
    assert steps[-3:] == ["finalize-zh-rhetoric", "train-zh-rhetoric-components", "finalize-zh-rhetoric-components"]
    assert "configs/zh_rhetoric_cpu.cfg" in " ".join(c for cmd in project["commands"] if cmd["name"] in steps for c in cmd["script"])
    assert any("spacy train" in " ".join(c["script"]) for c in project["commands"] if c["name"] in steps)


def test_spacy_project_run_train_dry_run():
    proc = subprocess.run([sys.executable, "-m", "spacy", "project", "run", "train", str(ROOT), "--dry"],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Running workflow 'train'" in proc.stdout
    assert "spacy_rhetoric finalize-pipeline" in proc.stdout


def test_every_dependency_and_output_is_one_path():
    """weasel merges two list items that are each one whole ``${vars.x}``
    into one string ("a, b"), a dependency that never exists."""
    from weasel.util import load_project_config

    config = load_project_config(ROOT)
    for cmd in config["commands"]:
        for path in cmd.get("deps", []) + cmd.get("outputs", []):
            assert ", " not in path, f"{cmd['name']}: {path!r}"


def test_train_workflow_builds_the_vectors_the_config_reads():
    """configs/zh_rhetoric_cpu.cfg reads static vectors; a step of `train`
    must build them before `spacy train` runs."""
    import spacy

    project = srsly.read_yaml(ROOT / "project.yml")
    vectors = spacy.util.load_config(ROOT / "configs" / "zh_rhetoric_cpu.cfg")["paths"]["vectors"]
    assert vectors
    by_name = {c["name"]: c for c in project["commands"]}
    steps = project["workflows"]["train"]
    builders = [i for i, s in enumerate(steps) if vectors in by_name[s].get("outputs", [])]
    trainers = [i for i, s in enumerate(steps) if "spacy train configs/zh_rhetoric_cpu.cfg" in " ".join(by_name[s]["script"])]
    assert builders and trainers and builders[0] < trainers[0]
    assert vectors in by_name[steps[trainers[0]]]["deps"]
