"""``arpo-train`` end to end on the fake desktop: config file + flags in, model, curve and merged
weights out."""

from __future__ import annotations

from arpo_trainer.cli import main
from arpo_trainer.modeling import load_model, load_processor
from repo_paths import ROOT

DEMO = ROOT / "packages" / "arpo_trainer" / "configs" / "demo.yaml"


def test_training_from_the_demo_config_writes_model_curve_and_a_merged_lora_model(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "--config",
            str(DEMO),
            "--output_dir",
            str(out),
            "--provider",
            "fake",
            "--settle",
            "false",
            "--vector_env",
            "sync",
            "--tasks",
            "builtin",
            "--task_ids",
            "os-infeasible-001",
            "--per_device_train_batch_size",
            "4",
            "--env_kwargs",
            "{}",
            "--max_steps",
            "2",
            # the demo starts from models/curriculum-base with an empty buffer; this test keeps the
            # offline tiny model and the (optional) oracle warm start covered
            "--model_name_or_path",
            "tiny",
            "--replay_warm_start",
            "oracle",
            "--save_strategy",
            "no",
            "--report_to",
            "none",
            "--use_lora",
            "true",
            "--lora_r",
            "4",
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    printed = captured.out
    # the quiet demo: the bar, not transformers' metrics dict at every logging step
    assert "'episode/success_rate'" not in printed + captured.err
    assert "replay warm start: 1 oracle demonstrations stored (os-infeasible-001)" in printed
    assert "Replay warm-started from oracle demonstrations." in printed
    assert "step  minutes  success  moving_avg" in printed
    assert (out / "success_curve.png").stat().st_size > 0
    assert (out / "adapter_config.json").exists()
    model, processor = load_model(str(out / "merged")), load_processor(out / "merged")
    assert not any("lora_" in n for n, _ in model.named_parameters())
    assert processor.tokenizer.convert_tokens_to_ids("<|image_pad|>") == model.config.image_token_id
