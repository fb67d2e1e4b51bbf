"""The tiny model learns from reward, not from a leaked solution (issue 13).

Its tokenizer and base corpus are built from the action grammar and generic text only: no oracle
action of any built-in task or of the pixel family (the demo's tasks) may be a single token (the
old tokenizer, learned from the oracles, made ``hotkey(key='ctrl alt t')`` one token), and the
corpus shares no oracle line. The demo runs without the oracle warm start and without the
task-derived tokenizer corpus.
"""

from __future__ import annotations

import math
import random
import re

import pytest
import yaml
from arpo_trainer.demos import oracle_script
from arpo_trainer.modeling import ModelArguments
from arpo_trainer.testing.base_policy import (
    BC_COMMANDS,
    BC_INSTRUCTIONS,
    BC_KEYS,
    GROUNDING_FILLS,
    GROUNDING_INSTRUCTIONS,
    GROUNDING_LABELS,
    grounding_fill,
)
from arpo_trainer.tiny import build_tokenizer, grammar_corpus
from osworld_gym.actions import make_action_set
from osworld_gym.support import builtin_tasks, load_tasks
from osworld_gym.tasks.pixels.layout import MENU_FILL, PALETTE, PANEL_FILL, SPENT
from repo_paths import ROOT

DEMO = ROOT / "packages/arpo_trainer/configs/demo.yaml"
_ARG = re.compile(r"(?:key|content)='((?:[^'\\]|\\.)*)'")


#: The built-in suite and instances of every pixel-family kind, both splits.
TASKS = [*builtin_tasks(), *load_tasks("pixels:all:all:16")]


def _oracle_lines() -> list[tuple[str, str]]:
    aset = make_action_set("uitars", screen_size=(640, 360))
    lines = []
    for task in TASKS:
        for raw in task.oracle or []:
            lines.append((task.id, raw))
        try:
            lines.extend((task.id, a) for a in oracle_script(task, aset))
        except ValueError:
            pass  # an oracle the UI-TARS syntax cannot express: its raw lines are still checked
    return lines


ORACLE = _oracle_lines()
# Generic UI-TARS calls every oracle script ends with: part of the grammar, not of a solution.
GRAMMAR_ONLY = {"Action: finished(content='')", "Action: call_user()", "Action: wait()", "FAIL"}


def test_there_are_oracles_to_check():
    assert len({t for t, _ in ORACLE}) > 50
    assert any("ctrl alt t" in line for _, line in ORACLE)
    assert any(t.startswith("pixels-menu-h") and "click(start_box=" in a for t, a in ORACLE)


@pytest.mark.parametrize("vocab_size", [600, 1024])
def test_no_oracle_action_or_argument_is_a_single_token(vocab_size):
    tok = build_tokenizer(vocab_size)
    single = []
    for task_id, line in ORACLE:
        if line in GRAMMAR_ONLY:
            continue
        if len(tok.encode(line)) <= 1:
            single.append((task_id, line))
        for arg in _ARG.findall(line):
            if len(arg.split()) > 1 and len(tok.encode(arg)) <= 1:
                single.append((task_id, arg))
    assert not single, f"oracle text that is one token: {single[:5]}"


def test_a_key_chord_is_several_tokens():
    tok = build_tokenizer(1024)
    assert len(tok.encode("ctrl alt t")) >= 3
    assert len(tok.encode("mkdir -p /home/user/Desktop/projects")) >= 8


def test_the_base_corpus_shares_no_oracle_line():
    corpus = [*grammar_corpus(), *BC_INSTRUCTIONS, *BC_COMMANDS, *BC_KEYS]
    shared = []
    for task_id, line in ORACLE:
        stripped = line.removeprefix("Action: ")
        for entry in corpus:
            if line == entry or (len(stripped) > 12 and stripped in entry):
                shared.append((task_id, line, entry))
    assert not shared, f"corpus entries that repeat an oracle: {shared[:5]}"


def test_bc_commands_and_instructions_are_no_task_text():
    instructions = {t.instruction.strip().lower() for t in TASKS}
    assert not instructions & {i.strip().lower() for i in BC_INSTRUCTIONS}
    assert not instructions & {i.strip().lower() for i in GROUNDING_INSTRUCTIONS}
    typed = {
        arg.replace("\\n", "").strip()
        for _, line in ORACLE
        if "type(content=" in line
        for arg in _ARG.findall(line)
    }
    assert not typed & {c.strip() for c in BC_COMMANDS}


def test_the_task_derived_tokenizer_corpus_is_off_by_default():
    assert ModelArguments().tiny_corpus_from_tasks is False


def test_the_demo_uses_no_oracle_and_no_task_corpus():
    cfg = yaml.safe_load(DEMO.read_text())
    assert cfg.get("replay_warm_start") in (None, "none")
    assert cfg.get("tiny_corpus_from_tasks", False) is False


def _rgb(hex_fill: str) -> tuple[int, int, int]:
    return int(hex_fill[1:3], 16), int(hex_fill[3:5], 16), int(hex_fill[5:7], 16)


#: Words of the pixel family's instructions and widgets beyond the generic "click", "the", "button"
#: (colour names, "menu", "item", the labels it writes).
FAMILY_WORDS = {*PALETTE, "menu", "item", "open", "choose", "then"}


def test_the_grounding_mix_names_nothing_of_the_pixel_family():
    """The grounding episodes (click whatever widget is shown) must not teach the family: no
    colour name, no family word in their instructions or labels, and no instruction of the
    family's form ("Click the X button.")."""
    words = set()
    for text in (*GROUNDING_INSTRUCTIONS, *GROUNDING_LABELS):
        words |= set(re.findall(r"[a-z]+", text.lower()))
    assert not words & FAMILY_WORDS, words & FAMILY_WORDS
    family_forms = {t.instruction for t in TASKS if t.id.startswith("pixels-")}
    for instruction in GROUNDING_INSTRUCTIONS:
        assert not re.fullmatch(r"Click the \w+ button\.", instruction)
        assert instruction not in family_forms


def test_the_grounding_fills_are_far_from_the_pixel_family_colours():
    """Every fill the grounding mix draws (1,000 draws, jitter included) is at least 70 RGB units
    from each of the family's six button colours and 50 from its menu, panel and spent fills,
    so the base policy never sees a family colour."""
    named = [_rgb(f) for f in PALETTE.values()]
    other = [_rgb(f) for f in (MENU_FILL, PANEL_FILL, SPENT)]
    rng = random.Random(0)
    draws = [grounding_fill(rng) for _ in range(1000)]
    assert len(set(draws)) > 100  # jittered, and every base fill turns up
    assert {min(GROUNDING_FILLS, key=lambda b: math.dist(b, d)) for d in draws} == set(
        GROUNDING_FILLS
    )
    closest_named = min(math.dist(d, c) for d in draws for c in named)
    closest_other = min(math.dist(d, c) for d in draws for c in other)
    assert closest_named >= 70, closest_named
    assert closest_other >= 50, closest_other
