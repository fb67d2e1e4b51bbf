"""Grammar-constrained decoding (``action_grammar``): every sampled turn parses, and the learner
scores each token under the same constrained distribution the sampler drew it from.

The sampler reports the log-prob of each token under the *masked* distribution (every token the
grammar forbids at that position set to -inf, then renormalized). If the learner scored the
same tokens over the full vocabulary, every action token's log-prob would sit ``log(mass of the
allowed tokens)`` lower, and the PPO / importance ratio would be off by that factor; the tests
below show that gap is large on a random model, and that the constrained learner closes it.
"""

from __future__ import annotations

import os
import random

import pytest
import torch
from arpo_trainer.grammar import ActionGrammar, TokenConstraint, sequence_masks
from arpo_trainer.tiny import build_tokenizer
from osworld_gym.actions import make_action_set
from test_trainer_loss import sampled_and_scored
from test_trainer_training import INFEASIBLE, make_config, make_trainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

FRAME = (140, 84)  # the tiny model's frame for a 640x360 screen


@pytest.fixture(scope="module")
def constraint() -> TokenConstraint:
    tok = build_tokenizer(1024)
    return TokenConstraint(ActionGrammar(FRAME), tok, tok.convert_tokens_to_ids("<|im_end|>"), 24)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("Action: click(start_box='(0,0)')", True),
        ("Action: right_single(start_box='(139,83)')", True),
        ("Action: click(start_box='(140,10)')", False),  # x outside the frame
        ("Action: click(start_box='(10,84)')", False),  # y outside the frame
        ("Action: click(start_box='(07,1)')", False),  # leading zero
        ("Action: drag(start_box='(1,2)', end_box='(3,4)')", True),
        ("Action: scroll(start_box='(1,2)', direction='left')", True),
        ("Action: scroll(start_box='(1,2)', direction='sideways')", False),
        ("Action: hotkey(key='ctrl alt t')", True),
        ("Action: hotkey(key='ctrl alt shift t')", False),  # at most three keys
        ("Action: type(content='it\\'s\\n')", True),
        ("Action: type(content='')", False),
        ("Action: type(content='it's')", False),  # unescaped quote
        ("Action: finished(content='')", True),
        ("Action: call_user()", True),
        ("Action: click(start_box='(1 click(start_box='(12", False),  # the base policy's kind
        ("Thought: x\nAction: wait()", False),
    ],
)
def test_the_grammar(text, ok):
    assert ActionGrammar(FRAME).accepts(text) is ok


def test_every_walk_through_the_allowed_tokens_is_an_action_that_parses(constraint):
    """1,000 turns drawn uniformly from the allowed tokens at each step (the adversarial case:
    the model's preferences play no part) all close within the budget and parse, with their
    points inside the frame."""
    aset = make_action_set("uitars", screen_size=(640, 360), max_pixels=28 * 28 * 16)
    assert getattr(aset, "frame") == FRAME  # noqa: B009
    tok = build_tokenizer(1024)
    rng = random.Random(0)
    kinds = set()
    for _ in range(1000):
        sid, ids = constraint.start, []
        for k in range(constraint.max_new_tokens):
            allowed = constraint.allowed(sid, constraint.max_new_tokens - k)
            assert allowed
            ids.append(rng.choice(allowed))
            if ids[-1] == constraint.eos:
                break
            sid = constraint.advance(sid, ids[-1])
        assert ids[-1] == constraint.eos, tok.decode(ids)
        text = tok.decode(ids[:-1])
        parsed = aset.parse(text)
        kinds.add(text.removeprefix("Action: ").split("(")[0])
        assert parsed is not None
    # every call of the grammar turns up
    assert kinds >= {"click", "drag", "scroll", "hotkey", "type", "finished", "wait", "call_user"}


def test_masks_follow_each_turn_of_a_sequence(constraint):
    tok = build_tokenizer(1024)
    header = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
    turn = tok.encode("Action: wait()", add_special_tokens=False) + [constraint.eos]
    user = tok.encode("<|im_start|>user\nhi<|im_end|>\n", add_special_tokens=False)
    ids = user + header + turn + tok.encode("\n", add_special_tokens=False) + user + header + turn
    masks = sequence_masks(constraint, ids, header)
    constrained = [k for k, m in enumerate(masks) if m is not None]
    first = len(user) + len(header)
    second = len(ids) - len(turn)
    assert constrained == [*range(first, first + len(turn)), *range(second, len(ids))]
    assert all(ids[k] in masks[k] for k in constrained)  # type: ignore[operator]


@pytest.fixture
def grammar_trainer(tmp_path):
    return make_trainer(
        tmp_path,
        lora=False,
        max_turns=2,
        max_turn_tokens=24,
        end_on_format_error=False,
        action_grammar=True,
    )


def test_the_random_model_samples_only_parsable_actions(grammar_trainer):
    """Without the grammar this random model writes almost no parsable action; with it, every
    turn of 16 episodes parses (the collector checks each turn with the action set)."""
    trainer = grammar_trainer
    task = trainer.tasks[INFEASIBLE]
    trajs = []
    with trainer.policy() as policy:
        for _ in range(4):
            trajs += trainer.collector(4).run([task] * 4, policy)
    trainer.close_desktops()
    turns = [t for tr in trajs for t in tr.turns]
    assert len(turns) >= 16
    assert [t.action_error for t in turns if t.action_error] == []
    assert all(tr.format_errors == 0 for tr in trajs)


def test_the_learner_scores_the_constrained_distribution(grammar_trainer):
    trainer = grammar_trainer
    sampling, logps, (ent, _), sampled, score = sampled_and_scored(trainer, compute_entropy=True)
    assert sampled.sum() > 20
    constraint, trainer.action_constraint = trainer.action_constraint, None
    try:  # the same tokens scored over the whole vocabulary (the bug this guards against)
        full, _, _ = score()
    finally:
        trainer.action_constraint = constraint
    torch.testing.assert_close(logps[sampled], sampling[sampled], atol=1e-4, rtol=0)
    assert ent is not None and torch.isfinite(ent).all()
    # unconstrained scoring is far off: the allowed tokens hold little of a random model's mass
    gap = (sampling[sampled] - full[sampled]).mean()
    assert gap > 0.5, gap


def test_the_ratio_between_trainer_and_sampler_is_one_under_the_grammar(grammar_trainer):
    """Through TRL's seam, with old log-probs recomputed: ``old_per_token_logps`` (the learner)
    equal ``sampling_per_token_logps`` (the sampler) on every sampled token."""
    trainer = grammar_trainer
    trainer.args.gradient_accumulation_steps = 2
    trainer.args.steps_per_generation = 4
    trainer.model.train()
    batch = trainer._generate_and_score_completions([trainer.train_dataset[0]] * 4)
    trainer.close_desktops()
    sampled = (batch["tool_mask"] * batch["completion_mask"]).bool()
    assert sampled.sum() > 20
    torch.testing.assert_close(
        batch["old_per_token_logps"][sampled],
        batch["sampling_per_token_logps"][sampled],
        atol=1e-4,
        rtol=0,
    )


def test_a_training_step_runs_under_the_grammar(tmp_path):
    trainer = make_trainer(
        tmp_path, lora=False, max_turns=2, max_turn_tokens=24, action_grammar=True, max_steps=1
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.warm_start_replay()
    trainer.train()
    trainer.close_desktops()
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p)]
    assert changed


def test_the_option_is_refused_where_it_cannot_hold(tmp_path):
    with pytest.raises(ValueError, match="action_grammar"):
        make_config(tmp_path, action_grammar=True, action_set="pyautogui")
