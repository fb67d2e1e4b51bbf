"""The demo's checked-in base policy (``models/curriculum-base``) is what its README says it is.

Its weights are the ones the README's digests name (a changed file must change its provenance
too); its tokenizer is the one the code learns from the action grammar and generic text today,
so no word of the pixel family came in through it; the chain that built it draws nothing of the
family; and ``scripts/build-curriculum-base.sh``, the way to build it again, runs its six stages
end to end and refuses bad input without touching anything.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import subprocess

import pytest
import yaml
from arpo_trainer.testing.base_policy import GROUNDING_FILLS
from arpo_trainer.tiny import build_tiny_vlm, load_tiny_vlm
from osworld_gym.tasks.pixels.layout import MENU_FILL, PALETTE, PANEL_FILL, SPENT
from repo_paths import ROOT, load_script

BASE = ROOT / "models" / "curriculum-base"
BUILD = ROOT / "scripts" / "build-curriculum-base.sh"
DEMO = ROOT / "packages" / "arpo_trainer" / "configs" / "demo.yaml"
#: The family's words beyond the generic "click" and "the" (its colours, "button", the menu's).
FAMILY_WORDS = {*PALETTE, "button", "menu", "item", "open", "choose", "then"}


def _rgb(hex_fill: str) -> tuple[int, int, int]:
    return int(hex_fill[1:3], 16), int(hex_fill[3:5], 16), int(hex_fill[5:7], 16)


def test_the_demo_trains_the_checked_in_base():
    cfg = yaml.safe_load(DEMO.read_text())
    assert (ROOT / cfg["model_name_or_path"]).resolve() == BASE.resolve()
    assert cfg["replay"] is True and cfg.get("replay_warm_start") in (None, "none")
    assert cfg["tasks"].startswith("pixels:train:")


def test_the_weights_are_the_ones_the_readme_names():
    rows = re.findall(r"\| `([\w.]+)` \| `([0-9a-f]{64})` \|", (BASE / "README.md").read_text())
    table = dict(rows)
    assert set(table) == {"model.safetensors", "tokenizer.json", "config.json"}
    for name, digest in table.items():
        assert hashlib.sha256((BASE / name).read_bytes()).hexdigest() == digest, name


def test_its_tokenizer_is_the_one_the_code_learns_from_grammar_and_generic_text(tmp_path):
    build_tiny_vlm(seed=0, vocab_size=1024).save(tmp_path)
    fresh = json.loads((tmp_path / "tokenizer.json").read_text())["model"]
    shipped = json.loads((BASE / "tokenizer.json").read_text())["model"]
    assert shipped["vocab"] == fresh["vocab"] and shipped["merges"] == fresh["merges"]
    # no colour of the family is a token ("open", "button" and "menu" are, from generic text)
    assert not {w.lstrip("Ġ").lower() for w in shipped["vocab"]} & set(PALETTE)


def test_it_loads_as_the_tiny_model():
    vlm = load_tiny_vlm(BASE)
    assert vlm.model.config.text_config.hidden_size == 64
    assert sum(p.numel() for p in vlm.model.parameters()) > 100_000


def test_the_chain_draws_nothing_of_the_family():
    probe = load_script("benchmarks/ablation/grounding/named_probe.py")
    assert len(probe.NAMES) == len(GROUNDING_FILLS)
    assert not set(probe.NAMES) & FAMILY_WORDS
    rng = random.Random(0)
    texts = set()
    for palette in (("teal", "pink"), ("teal", "pink", "lime", "brown"), probe.NAMES):
        for word_only in (False, True):
            for _ in range(50):
                widgets, _, text = probe.named_scene(
                    rng, (640, 360), None, palette, word_only, True
                )
                texts.add(text)
                assert all(label == "" for _, _, label in widgets)
    words = {w for t in texts for w in re.findall(r"[a-z]+", t.lower())}
    assert words == {"click", "the", "box", *probe.NAMES}
    family = [_rgb(f) for f in PALETTE.values()]
    other = [_rgb(f) for f in (MENU_FILL, PANEL_FILL, SPENT)]
    assert min(math.dist(f, c) for f in GROUNDING_FILLS for c in family) >= 70
    assert min(math.dist(f, c) for f in GROUNDING_FILLS for c in other) >= 50


def _build(out, steps: str | None, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("CURRICULUM_STEPS", None)
    if steps is not None:
        env["CURRICULUM_STEPS"] = steps
    return subprocess.run(
        ["bash", str(BUILD), str(out)], capture_output=True, text=True, env=env, cwd=ROOT,
        timeout=1800,
    )  # fmt: skip


def test_the_build_refuses_an_existing_directory_and_a_bad_step_count(tmp_path):
    out = tmp_path / "base"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = _build(out, "2", tmp_path)
    assert proc.returncode == 2 and "exists" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    for bad in ("0", "-3", "two", "1.5"):
        proc = _build(tmp_path / f"new-{bad}", bad, tmp_path)
        assert proc.returncode == 2 and "CURRICULUM_STEPS" in proc.stderr, proc.stderr
        assert not (tmp_path / f"new-{bad}").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)  # about a minute alone; six model loads and probes on a busy machine
def test_the_build_runs_its_six_stages_end_to_end(tmp_path):
    """Every stage for 2 steps (the chain's plumbing, not a base): each stage starts from the
    last one's model, and OUT ends as a model the trainer loads."""
    out = tmp_path / "base"
    proc = _build(out, "2", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stages = out / "stages"
    for name in ("1-actions", "2-aim/step-2", "3-two-places", "4-named2", "5-named4", "6-named8"):
        assert (stages / name / "model.safetensors").is_file(), name
    for i, name in enumerate(("3-two-places", "4-named2", "5-named4", "6-named8")):
        record = json.loads((stages / f"{name}.json").read_text())
        assert record["args"]["steps"] == 2
        before = ("2-aim/step-2", "3-two-places", "4-named2", "5-named4")[i]
        assert record["args"]["base"] == str(stages / before)
    assert (out / "model.safetensors").read_bytes() == (
        stages / "6-named8" / "model.safetensors"
    ).read_bytes()
    load_tiny_vlm(out)


def test_the_demo_refuses_a_base_that_is_no_model(tmp_path):
    """A wrong ``DEMO_BASE`` is named at once, before the install checks and before training."""
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    for base in (tmp_path / "missing", empty):
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "demo.sh"), "--output_dir", str(tmp_path / "run")],
            capture_output=True, text=True, env={**os.environ, "DEMO_BASE": str(base)},
            cwd=ROOT, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert f"no base policy at '{base}'" in proc.stderr
        assert not (tmp_path / "run").exists()
