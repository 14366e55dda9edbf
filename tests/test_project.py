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
    assert steps.index("corpora") < steps.index("train-cross-paragraph") < steps.index("finalize-zh-rhetoric")
    # the component head is retrained on the finalised pipeline, then tuned again
    assert steps[-3:] == ["finalize-zh-rhetoric", "train-zh-rhetoric-components", "finalize-zh-rhetoric-components"]
    assert "configs/zh_rhetoric_cpu.cfg" in " ".join(c for cmd in project["commands"] if cmd["name"] in steps for c in cmd["script"])
    assert any("spacy train" in " ".join(c["script"]) for c in project["commands"] if c["name"] in steps)


def test_spacy_project_run_train_dry_run():
    proc = subprocess.run([sys.executable, "-m", "spacy", "project", "run", "train", str(ROOT), "--dry"],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Running workflow 'train'" in proc.stdout
    assert "spacy_rhetoric pipeline finalize" in proc.stdout


def test_every_dependency_and_output_is_one_path():
    """weasel merges two list items that are each one whole ``${vars.x}``
    into one string ("a, b"), a dependency that never exists."""
    from weasel.util import load_project_config

    for project_dir in (ROOT, ROOT / "research"):
        config = load_project_config(project_dir)
        for cmd in config["commands"]:
            for path in cmd.get("deps", []) + cmd.get("outputs", []):
                assert ", " not in path, f"{cmd['name']}: {path!r}"


def test_the_build_is_at_most_twenty_commands_in_five_workflows():
    """project.yml shows how the product is built; experiments live in
    research/project.yml. Every build command belongs to a workflow, says in
    one line what it does, and names the files it writes."""
    from weasel.util import load_project_config

    config = load_project_config(ROOT)
    commands = {c["name"]: c for c in config["commands"]}
    assert len(commands) <= 20
    assert set(config["workflows"]) == {"assets", "train", "train-trf", "evaluate", "generator"}
    assert {s for steps in config["workflows"].values() for s in steps} == set(commands)
    for name, cmd in commands.items():
        assert "\n" not in cmd["help"] and len(cmd["help"]) <= 130, name
        assert cmd.get("outputs"), name


def test_research_project_is_a_separate_valid_project():
    """The experiment records run from research/ with paths relative to it;
    no command is defined in both files."""
    from weasel.util import load_project_config

    product = {c["name"] for c in load_project_config(ROOT)["commands"]}
    research = load_project_config(ROOT / "research")
    names = [c["name"] for c in research["commands"]]
    assert names and len(names) == len(set(names)) and not product & set(names)
    for cmd in research["commands"]:
        for path in cmd.get("deps", []) + cmd.get("outputs", []):
            assert path.startswith(".."), f"{cmd['name']}: {path!r} is not relative to research/"
    proc = subprocess.run([sys.executable, "-m", "spacy", "project", "document", str(ROOT / "research")],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(f"`{name}`" in proc.stdout for name in names)


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
