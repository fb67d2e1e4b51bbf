"""The async fake-desktop training of ``test_trainer_async_training.py``, run N times, printing
what decides step 1's importance-sampling ratio (docs/async.md, "On a GPU").

    ARPO_TEST_DEVICE=cuda python benchmarks/async/gpu_probe.py --runs 6

Per run: the largest gap between the learner's and the generator's trainable weights when each
step takes its groups, the versions of the members taken, and the largest deviation of each
step's ratio from 1. Step 1 trains on groups sampled one version back (weights are copied to the
generator every 2 steps), so its ratio should move away from 1; on CPU it does in every seed
tried (0.10 to 0.50), on an H200 it stayed within 1e-6 of 1 in some runs.

For each policy row a step scores, it also prints what separates the two explanations of a ratio
near 1: the row's scored tokens, their mean entropy under the learner (near 0: the tokens are
near-certain, so no small update moves their log-probs), and the largest per-token gap between
the learner's log-probs and the generator's copy's, both recomputed now on the same input (zero
while the weights differ: the learner's forward does not see its own update), and the largest
gap between the scoring forward's log-probs (the ratio's numerator) and the learner's recomputed
now (above zero: the scoring forward saw other weights than the learner's after its update).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "arpo_trainer"), str(ROOT / "tests")]

import test_trainer_async_training as t  # noqa: E402 - after the test folders are importable


class Probe(t.RecordingTrainer):
    def _async_groups(self, rows: int, G: int, step: int):
        out = super()._async_groups(rows, G, step)
        learner = self.accelerator.unwrap_model(self.trained_model)
        assert self._generator_model is not None
        gen = dict(self._generator_model.named_parameters())
        gap = max(
            float((p.detach() - gen[n]).abs().max())
            for n, p in learner.named_parameters()
            if n in gen
        )
        members = [(m.source, m.step) for m in out[1]]
        print(f"  step {step}: weight gap {gap:.3g}, members (source, version) {members}")
        return out

    def _add_logps(self, output, input_ids, attention_mask, logits_to_keep, *rest):
        sampling_logps, loss_mask, trajs, mode = rest
        super()._add_logps(output, input_ids, attention_mask, logits_to_keep, *rest)
        if mode != "train" or "old_per_token_logps" not in output:
            return
        fwd = {k: output[k] for k in ("pixel_values", "image_grid_thw") if k in output}
        fwd.update(num_images=output["num_images"], mm_token_type_ids=output["mm_token_type_ids"])
        assert self._generator_model is not None
        with torch.no_grad():
            mine, ent, _ = self._get_per_token_logps_and_entropies(
                self.model, input_ids, attention_mask, logits_to_keep, compute_entropy=True, **fwd
            )
            theirs, _, _ = self._get_per_token_logps_and_entropies(
                self._generator_model, input_ids, attention_mask, logits_to_keep, **fwd
            )
        mask = loss_mask.to(mine.device).bool()
        for i, traj in enumerate(trajs):
            m = mask[i]
            if traj.source != "policy" or not bool(m.any()):
                continue
            gap = float((mine[i][m] - theirs[i][m].to(mine.device)).abs().max())
            # the scoring forward's own log-probs (the ratio's numerator) against a forward now
            scored = float(
                (output["old_per_token_logps"][i].to(mine.device)[m] - mine[i][m]).abs().max()
            )
            samp = output["sampling_per_token_logps"][i].to(mine.device)[m]
            print(
                f"    row {i}: {int(m.sum())} tokens, mean entropy {float(ent[i][m].mean()):.3g}, "
                f"sum log-prob learner {float(mine[i][m].sum()):.4g} / sampled "
                f"{float(samp.sum()):.4g} / generator copy now {float(theirs[i][m].sum()):.4g}, "
                f"largest learner-generator gap per token {gap:.3g}, scoring forward vs now "
                f"{scored:.3g}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=4)
    args = ap.parse_args()
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            t.RecordingTrainer, saved = Probe, t.RecordingTrainer
            try:
                trainer = t.run_async(Path(d), weight_sync_every=2)
            finally:
                t.RecordingTrainer = saved
            devs = [
                float((o["importance_sampling_ratio"] - 1).abs().max()) for o in trainer.outputs
            ]
            print(
                f"run {i} on {trainer.accelerator.device}: ratio deviation from 1 per step "
                + ", ".join(f"{x:.2g}" for x in devs),
                flush=True,
            )


if __name__ == "__main__":
    main()
