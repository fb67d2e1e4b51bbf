"""The private parts of TRL (and of transformers' ``Trainer``) that ``ARPOTrainer`` relies on,
checked one by one.

``ARPOTrainer`` (packages/arpo_trainer/src/arpo_trainer/trainer.py) overrides private methods of
``GRPOTrainer`` (the rollout seam ``_generate_and_score_completions``, the batch splitting in
``_prepare_inputs``, the chunked log-probs, checkpoint save/load) and reads private attributes
(``_metrics``, ``_logs``, ``_tokenizer``...). TRL gives no public API for a multi-turn, multimodal
rollout (docs/trainer.md says why ``rollout_func`` is not one). packages/arpo_trainer/pyproject.toml
pins TRL exactly; after an upgrade these tests say which member moved, instead of a run failing
deep inside a training step. They read signatures and source: no model is built.
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest
import transformers
import trl
from arpo_trainer import trainer as arpo_trainer_module
from arpo_trainer.trainer import ARPOTrainer
from trl import GRPOTrainer

WHERE = f"TRL {trl.__version__}, transformers {transformers.__version__}"
SOURCE = inspect.getsource(arpo_trainer_module)
GRPO_SOURCE = inspect.getsource(inspect.getmodule(GRPOTrainer))

#: Private methods ARPOTrainer overrides or calls: the parameters we pass or accept.
METHODS: dict[str, list[str]] = {
    "_generate_and_score_completions": ["inputs"],
    "_prepare_inputs": ["generation_batch"],
    "_get_per_token_logps_and_entropies": [
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "compute_aux_loss",
        "pixel_values",
        "image_grid_thw",
        "num_images",
        "mm_token_type_ids",
    ],
    "_calculate_rewards": ["inputs", "prompts", "completions", "completion_ids_list"],
    "_compute_loss": ["model", "inputs"],
    "_save_checkpoint": ["model", "trial"],
    "_load_optimizer_and_scheduler": ["checkpoint"],
    "_get_output_dir": ["trial"],
}

#: Private attributes ARPOTrainer reads, and how GRPOTrainer sets them (a regex on its source).
ATTRIBUTES: dict[str, str] = {
    "_is_vlm": r"self\._is_vlm = (True|False)",
    "_tokenizer": r"self\._tokenizer = processing_class(\.tokenizer)?\b",
    "_metrics": r'self\._metrics = \{"train": defaultdict\(list\), "eval": defaultdict\(list\)\}',
    "_logs": r"self\._logs = \{",
    "_buffered_inputs": r"self\._buffered_inputs = ",
    "_step": r"self\._step = 0",
}

#: The keys of ``self._logs`` ARPOTrainer extends.
LOG_KEYS = ["prompt", "completion", "rewards", "advantages"]


def _line(name: str) -> str:
    for i, text in enumerate(SOURCE.splitlines(), 1):
        if re.search(rf"\b{re.escape(name)}\b", text):
            return f"trainer.py:{i}"
    return "trainer.py"


def _touched_private_members() -> set[str]:
    """Every ``self._x`` / ``super()._x`` of ARPOTrainer's class body that a base class has."""
    (cls,) = [
        n
        for n in ast.walk(ast.parse(SOURCE))
        if isinstance(n, ast.ClassDef) and n.name == "ARPOTrainer"
    ]
    used: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            base = node.value
            is_self = isinstance(base, ast.Name) and base.id == "self"
            is_super = (
                isinstance(base, ast.Call)
                and isinstance(base.func, ast.Name)
                and base.func.id == "super"
            )
            if (is_self or is_super) and not node.attr.startswith("__"):
                used.add(node.attr)
        if isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
            used.add(node.name)
    return {
        name
        for name in used
        if any(hasattr(b, name) for b in GRPOTrainer.__mro__)
        or re.search(rf"self\.{name}\s*=", GRPO_SOURCE)
    } - {"__init__"}


def test_the_guarded_list_is_every_private_member_arpo_trainer_touches():
    touched = _touched_private_members()
    guarded = set(METHODS) | set(ATTRIBUTES)
    assert touched - guarded == set(), (
        f"ARPOTrainer touches private TRL/transformers members this test does not guard: "
        f"{sorted(touched - guarded)}; add them to METHODS or ATTRIBUTES"
    )
    assert guarded - touched == set(), f"no longer touched, drop them: {sorted(guarded - touched)}"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_private_method_still_takes_what_we_pass(name):
    owners = [b for b in GRPOTrainer.__mro__ if name in vars(b)]
    assert owners, f"{WHERE}: GRPOTrainer has no method {name} any more (used at {_line(name)})"
    params = inspect.signature(vars(owners[0])[name]).parameters
    missing = [p for p in METHODS[name] if p not in params]
    assert not missing, (
        f"{WHERE}: {owners[0].__name__}.{name} has no parameter(s) {missing} any more "
        f"(used by ARPOTrainer at {_line(name)}); it takes {list(params)}"
    )


@pytest.mark.parametrize("name", sorted(ATTRIBUTES))
def test_each_private_attribute_is_still_set_as_we_read_it(name):
    assert re.search(ATTRIBUTES[name], GRPO_SOURCE), (
        f"{WHERE}: GRPOTrainer no longer sets self.{name} as /{ATTRIBUTES[name]}/ "
        f"(read by ARPOTrainer at {_line(name)})"
    )


def test_the_logs_keep_the_keys_we_extend():
    init = GRPO_SOURCE[GRPO_SOURCE.index("self._logs = {") :]
    block = init[: init.index("\n        }") + 10]
    missing = [k for k in LOG_KEYS if f'"{k}":' not in block]
    assert not missing, (
        f"{WHERE}: GRPOTrainer._logs has no key(s) {missing} any more "
        f"(ARPOTrainer._record_metrics extends them, {_line('_logs')})"
    )


def test_our_overrides_are_overrides_not_new_methods():
    # a rename upstream would leave our method in place, silently never called
    overrides = ["_generate_and_score_completions", "_prepare_inputs", "_save_checkpoint",
                 "_load_optimizer_and_scheduler", "_get_per_token_logps_and_entropies"]  # fmt: skip
    for name in overrides:
        assert name in vars(ARPOTrainer), name
        assert any(name in vars(b) for b in GRPOTrainer.__mro__), (
            f"{WHERE}: ARPOTrainer.{name} overrides nothing any more: TRL renamed or removed it"
        )


def test_the_vllm_weight_sync_hooks_still_exist():
    vllm_generation = pytest.importorskip(
        "trl.generation.vllm_generation", reason="TRL's vLLM module needs vLLM"
    )
    cls = vllm_generation.VLLMGeneration
    for name in ("sync_weights", "_iter_named_params"):
        assert callable(getattr(cls, name, None)), (
            f"{WHERE}: VLLMGeneration.{name} is gone (vllm_rollout.CPUColocateSync uses it)"
        )


def test_the_importance_sampling_switch_async_mode_turns_on_is_the_only_use_vllm_in_the_loss():
    """Async rollouts (issue 28) set ``use_vllm`` for the duration of ``_compute_loss`` so that
    TRL multiplies the importance-sampling ratio in: that must stay the flag's only effect there."""
    loss_source = inspect.getsource(GRPOTrainer._compute_loss)
    assert loss_source.count("self.use_vllm") == 1, WHERE
    assert re.search(
        r"if self\.use_vllm and self\.vllm_importance_sampling_correction[^:]*:\s*\n\s*"
        r'per_token_loss = per_token_loss \* inputs\["importance_sampling_ratio"\]',
        loss_source,
    ), WHERE
