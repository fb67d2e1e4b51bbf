"""The quiet demo: reading the demo's config emits no FutureWarning (transformers 5 renamed
``gradient_checkpointing``; ARPOConfig translates it at the cause, the YAML key keeps working),
and the progress bar no longer writes the metrics dict at every logging step."""

from __future__ import annotations

import os
import warnings

from arpo_trainer.config import ARPOConfig
from arpo_trainer.metrics import QuietProgressCallback
from arpo_trainer.modeling import ModelArguments
from repo_paths import ROOT
from transformers import TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import ProgressCallback
from trl import TrlParser

DEMO = ROOT / "packages" / "arpo_trainer" / "configs" / "demo.yaml"


def _future_warnings(build) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = build()
    return value, [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]


def test_the_demo_config_reads_without_a_future_warning(tmp_path):
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    parser = TrlParser((ARPOConfig, ModelArguments))
    argv = ["--config", str(DEMO), "--output_dir", str(tmp_path)]
    (args, _), future = _future_warnings(lambda: parser.parse_args_and_config(argv))
    assert future == []
    assert args.activation_checkpointing is False and args.gradient_checkpointing is False


def test_the_old_key_still_works_and_the_default_stays_on(tmp_path):
    old, future = _future_warnings(
        lambda: ARPOConfig(output_dir=str(tmp_path), use_cpu=True, gradient_checkpointing=False)
    )
    assert future == []
    assert old.activation_checkpointing is False and old.gradient_checkpointing is False
    default, future = _future_warnings(lambda: ARPOConfig(output_dir=str(tmp_path), use_cpu=True))
    assert future == []
    assert default.activation_checkpointing is True and default.gradient_checkpointing is True


def _logged(callback_class, tmp_path, capsys) -> str:
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    state, control = TrainerState(max_steps=3), TrainerControl()
    cb = callback_class()
    cb.on_train_begin(args, state, control)
    cb.on_log(args, state, control, logs={"loss": 0.125, "episode/success_rate": 0.5})
    cb.on_train_end(args, state, control)
    captured = capsys.readouterr()
    return captured.out + captured.err


def test_the_progress_bar_does_not_print_the_metrics_dict(tmp_path, capsys):
    # transformers' own bar writes the dict: the control that this test can fail
    assert "'episode/success_rate': '0.5'" in _logged(ProgressCallback, tmp_path, capsys)
    assert "episode/success_rate" not in _logged(QuietProgressCallback, tmp_path, capsys)


def _stderr_of(action, capsys) -> str:
    capsys.readouterr()
    action()
    return capsys.readouterr().err


def test_saving_and_loading_weights_prints_no_bar_of_its_own(tmp_path, capsys):
    from arpo_trainer.modeling import load_model, weight_io_bars_off
    from arpo_trainer.tiny import build_tiny_vlm
    from transformers.utils import logging as hf_logging

    model = build_tiny_vlm(seed=0).model
    # transformers' own save draws the bar: the control that this test can fail
    plain = _stderr_of(lambda: model.save_pretrained(tmp_path / "plain"), capsys)
    assert "Writing model shards" in plain
    with weight_io_bars_off():
        quiet = _stderr_of(lambda: model.save_pretrained(tmp_path / "quiet"), capsys)
    assert "Writing model shards" not in quiet
    assert hf_logging.is_progress_bar_enabled(), "the bars are on again afterwards"
    # ARPOTrainer.save_model (checkpoints and the final save) saves inside weight_io_bars_off
    loaded = _stderr_of(lambda: load_model(str(tmp_path / "quiet"), dtype="float32"), capsys)
    assert "Loading weights" not in loaded
    assert hf_logging.is_progress_bar_enabled()
