"""Rollout benchmark (issue 28): the synchronous lock-step loop against the asynchronous one, side
by side in one run, on real local desktops with the tiny model.

Both modes play the same groups (same tasks, same group size, same episode lengths) on the same
number of desktops, and run the same learner between steps; what differs is only the loop:

* **sync**: :class:`~arpo_trainer.rollout.Collector` (what ``arpo-train`` runs today): one step =
  reset all desktops, lock-step turns until every episode ended, then the learner step; the
  desktops and the generator wait for the learner and for the slowest episode;
* **async**: :mod:`arpo_trainer.async_rollout`: each desktop plays whole episodes on its own thread
  against a batching generation service, the learner takes complete groups as they arrive
  (``max_staleness`` versions old at most), weights go to the generator every step.

Conditions that are *simulated*, and stated in the table's header:

* ``--gen-latency-s``: added to every generate call (the tiny model answers in milliseconds; a 7B
  model on a GPU needs on the order of 0.5-2 s per turn, nearly independent of batch size);
* ``--learn-s``: the learner step is a sleep of this length (a stand-in for the optimizer step,
  which is not part of what is measured here: the rollout loop is), plus ``--learn-s-per-turn``
  times the turns of the step's episodes: an update's cost grows with the tokens it trains on
  (docs/async.md derives 0.71 s per turn for one GPU from the H200 check's first 28-layer
  update tokens/s, a figure from a noisy slope that the check no longer prints, and 3,070
  tokens per 1920x1080 turn; the plan's update speed gives 0.89 s);
* ``--lengths``: episode lengths. The tiny model's text is sampled for real (its ids and log-probs
  are kept) but the *action sent* follows a script per (group, member): ``length - 1`` clicks then
  DONE. The default, ``1-15``, is issue 28's GUI episodes: each episode's length is drawn uniformly
  from 1 to 15 turns (mean 8; a group of 2 differs by 5 turns on average, the longest of a lock-step
  batch of 4 is 12.5 on average), from a generator seeded by ``--length-seed`` and the episode's
  (group, member), so both modes play exactly the same lengths. A comma list (``1,6,2,4``) is
  cycled instead. Desktop work (resets, clicks, settles, scoring) is real.

Rounds (``--rounds``) interleave the modes, sync, async, sync, async, ..., each round on fresh
desktops and the full ``--groups`` budget, so that load from other processes on a shared machine
falls on both modes alike; the tables give each round's ratio and the pooled one (all episodes over
all wall time, per mode). Async's episodes are the ones *handed to the learner* (groups dropped as
stale are replaced and not counted, as is nothing played ahead of the budget's end).

Measured from timestamps the rollout code records (:class:`~arpo_trainer.async_rollout.Timeline`):
desktop utilisation = desktop-seconds inside a reset, an action, its settle or scoring (each
desktop's own ``info["timings"]``) / (desktops x wall time); generator idle = share of wall time
with no generate call running; learner idle = share with no learner step running.

The utilisation bound printed with each mode is what one desktop playing one episode at a time
can reach: desktop seconds per turn ``a`` (measured: busy desktop-seconds / turns, resets
included) over ``a + g`` with ``g`` the simulated generation latency per turn.

    uv run python benchmarks/bench_async_rollout.py [--desktops 4] [--groups 16] [--rounds 3] \
        [--lengths 1-15] [--gen-latency-s 1.0] [--learn-s 3.0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TASKS = ["os-mkdir-001", "os-rename-001", "os-copy-001", "os-count-lines-001"]
CLICK_CANDIDATES = [
    "Thought: look\nAction: click(start_box='(70,42)')",
    "Thought: look\nAction: click(start_box='<|box_start|>(70,42)<|box_end|>')",
]


class Lengths:
    """Episode length of (group, member): ``lo-hi`` uniform integers (seeded per episode), or a
    comma list cycled over the episodes."""

    def __init__(self, spec: str, seed: int, group_size: int):
        self.spec, self.seed, self.G = spec, seed, group_size
        if "-" in spec:
            lo, hi = (int(x) for x in spec.split("-", 1))
            if not 1 <= lo <= hi:
                raise SystemExit(f"--lengths {spec!r}: need 1 <= lo <= hi")
            self.lo, self.hi, self.cycle = lo, hi, None
        else:
            self.cycle = [int(x) for x in spec.split(",")]
            if not self.cycle or min(self.cycle) < 1:
                raise SystemExit(f"--lengths {spec!r}: lengths must be at least 1")
            self.lo, self.hi = min(self.cycle), max(self.cycle)

    def __call__(self, group: int, member: int) -> int:
        if self.cycle is not None:
            return self.cycle[(group * self.G + member) % len(self.cycle)]
        return random.Random(f"{self.seed}-{group}-{member}").randint(self.lo, self.hi)

    def describe(self) -> str:
        if self.cycle is not None:
            return f"cycled {self.cycle}"
        return f"uniform {self.lo}-{self.hi} turns per episode (seed {self.seed})"


class ScriptedLengths:
    """Samples with the real policy, then sends a scripted action so that episode lengths are
    uneven and the same in both modes (see the module docstring)."""

    def __init__(self, policy: Any, click: str, done: str, lengths: Lengths):
        self.policy, self.click, self.done, self.lengths = policy, click, done, lengths
        self.key_of: dict[int, tuple[int, int]] = {}  # row -> (group, member)
        self.lookup: Callable[[int], tuple[int, int]] | None = None  # async: uid -> key
        self.turn: dict[int, int] = {}
        self.lock = threading.Lock()

    def sample(self, contexts, rows):
        from arpo_trainer.generation import TurnSample

        out = self.policy.sample(contexts, rows)
        scripted = []
        with self.lock:
            for r, s in zip(rows, out, strict=True):
                key = self.lookup(r) if self.lookup else self.key_of[r]
                k = self.turn.get(r, 0)
                self.turn[r] = k + 1
                text = self.done if k + 1 >= self.lengths(*key) else self.click
                scripted.append(TurnSample(ids=s.ids, logps=s.logps, text=text))
        return scripted


def build(args: argparse.Namespace, tmp: str) -> dict[str, Any]:
    import torch
    from arpo_trainer.config import ARPOConfig
    from arpo_trainer.envspec import env_kwargs, make_encoder, make_policy_action_set
    from arpo_trainer.generation import TransformersPolicy, turn_generation_config
    from arpo_trainer.tasks import resolve_tasks
    from arpo_trainer.tiny import build_tiny_vlm
    from osworld_gym.episodes import done_text

    torch.set_num_threads(1)
    cfg = ARPOConfig(
        output_dir=tmp,
        use_cpu=True,
        bf16=False,
        report_to="none",
        provider="local",
        settle=True,
        settle_max_s=1.0,
        vector_env="async",
        screen_width=640,
        screen_height=360,
        max_turns=args.max_turns,
        max_turn_tokens=8,
        end_on_format_error=False,
        task_ids=TASKS,
        per_device_train_batch_size=args.desktops,
        num_generations=args.group_size,
    )
    vlm = build_tiny_vlm(seed=0)
    encoder = make_encoder(cfg, vlm.processor)
    action_set = make_policy_action_set(cfg, encoder)
    click = None
    for c in CLICK_CANDIDATES:
        try:
            action_set.parse(c)
            click = c
            break
        except Exception as e:  # noqa: BLE001 - try the next spelling
            print(f"{c!r}: {e}")
    if click is None:
        raise SystemExit(f"none of {CLICK_CANDIDATES} parses in {cfg.action_set}")
    gen = TransformersPolicy(
        vlm.model, encoder, turn_generation_config(encoder, max_new_tokens=cfg.max_turn_tokens)
    )
    tasks = resolve_tasks(cfg.tasks, TASKS, provider="local")
    return dict(
        cfg=cfg,
        encoder=encoder,
        action_set=action_set,
        env=env_kwargs(cfg, encoder),
        policy=gen,
        click=click,
        done=done_text(action_set),
        tasks=[tasks[t] for t in TASKS],
    )


def _report(tl: Any, start: float, end: float, n: int, gen_latency_s: float) -> dict[str, float]:
    rep = tl.report(start, end, n)
    per_turn = tl.desktop_busy / max(tl.turns, 1)  # desktop-seconds per turn, resets included
    rep["desktop_s_per_turn"] = per_turn
    rep["utilisation_bound"] = per_turn / (per_turn + gen_latency_s)
    return rep


def in_flight_of(mode: str) -> int | None:
    """N of an ``async@N`` mode (None for any other mode or a bad N)."""
    head, _, n = mode.partition("@")
    return int(n) if head == "async" and n.isdigit() and int(n) >= 1 else None


def learner_s(args: argparse.Namespace, turns: int) -> float:
    """The simulated learner step over episodes of ``turns`` turns in all."""
    return args.learn_s + args.learn_s_per_turn * turns


def run_sync(b: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    from arpo_trainer.async_rollout import InstrumentedPolicy, InstrumentedPool, Timeline
    from arpo_trainer.desktops import DesktopPool
    from arpo_trainer.rollout import Collector

    tl = Timeline()
    G, n, per_step = args.group_size, args.desktops, args.groups_per_step
    pool = InstrumentedPool(DesktopPool(n, b["env"], backend="async"), tl)
    scripted = ScriptedLengths(b["policy"], b["click"], b["done"], b["lengths"])
    policy = InstrumentedPolicy(scripted, tl, args.gen_latency_s)
    col = Collector(
        pool,  # pyright: ignore[reportArgumentType] - a DesktopPool's interface, instrumented
        b["encoder"],
        b["action_set"],
        max_turns=args.max_turns,
        end_on_format_error=False,
    )
    steps = -(-args.groups // per_step)
    try:
        pool.pool.reset([b["tasks"][0]] * n)  # start the desktops outside the measured time
        tl.desktop_busy = 0.0
        start = time.monotonic()
        for step in range(steps):
            groups = [g for g in range(step * per_step, (step + 1) * per_step) if g < args.groups]
            # a step of more episodes than desktops is lock-step batches of `desktops` episodes
            # (whole groups), each followed by its micro-batch's share of the update, as the
            # trainer's sync mode with gradient_accumulation_steps > 1 plays it (one desktop per
            # row of a generation batch); the fixed part of the update comes after the last
            per_batch = n // G
            for first in range(0, len(groups), per_batch):
                tasks, keys = [], {}
                for g in groups[first : first + per_batch]:
                    for m in range(G):
                        keys[len(tasks)] = (g, m)
                        tasks.append(b["tasks"][g % len(b["tasks"])])
                scripted.key_of, scripted.turn = keys, {}
                trajs = col.run(tasks, policy, step=step)
                for t in trajs:
                    tl.add_episode(len(t.turns))
                last = first + per_batch >= len(groups)
                t0 = time.monotonic()
                turns = sum(len(t.turns) for t in trajs)
                time.sleep(args.learn_s_per_turn * turns + (args.learn_s if last else 0.0))
                tl.add_span("learn", t0, time.monotonic())
        end = time.monotonic()
    finally:
        pool.close()
    rep = _report(tl, start, end, n, args.gen_latency_s)
    rep["learner_steps"] = float(steps)
    rep["taken_turns_per_episode"] = tl.turns / max(tl.episodes, 1)
    return rep


def run_async(
    b: dict[str, Any], args: argparse.Namespace, gate: bool, in_flight: int | None = None
) -> dict[str, float]:
    """``in_flight``: the trainer's generator with that many batches out at once
    (``async_requests_in_flight``), each paying the per-call latency; ``None``: the
    ``--latency-model``'s generator."""
    from arpo_trainer import async_rollout as ar
    from arpo_trainer.desktops import DesktopPool

    tl = ar.Timeline()
    G, n, per_step = args.group_size, args.desktops, args.groups_per_step
    pools = [ar.InstrumentedPool(DesktopPool(1, b["env"], backend="async"), tl) for _ in range(n)]
    scripted = ScriptedLengths(b["policy"], b["click"], b["done"], b["lengths"])
    if in_flight is not None:
        gen = ar.BatchingGenerator(
            ar.InstrumentedPolicy(scripted, tl, args.gen_latency_s), max_in_flight=in_flight
        )
    elif args.latency_model == "per-call":
        gen = ar.BatchingGenerator(ar.InstrumentedPolicy(scripted, tl, args.gen_latency_s))
    else:  # a continuous-batching server: every request pays the latency, concurrently
        gen = ar.BatchingGenerator(
            ar.InstrumentedPolicy(scripted, tl), request_latency_s=args.gen_latency_s, timeline=tl
        )
    col = None
    taken = {"episodes": 0, "turns": 0}
    try:
        warm = [threading.Thread(target=p.pool.reset, args=([b["tasks"][0]],)) for p in pools]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        tl.desktop_busy = 0.0
        col = ar.AsyncCollector(
            pools,
            b["encoder"],
            b["action_set"],
            gen,
            max_turns=args.max_turns,
            end_on_format_error=False,
            timeline=tl,
            max_staleness=None if args.no_abandon else args.max_staleness,
        )
        jobs = col.episode_of
        scripted.lookup = lambda uid: (jobs[uid].group, jobs[uid].index)
        asm = ar.GroupAssembler(G, args.max_staleness)

        def task_of(g: int) -> Any:
            return b["tasks"][g % len(b["tasks"])]

        def learn(groups, version):
            turns = sum(len(t.turns) for g in groups for t in g)
            taken["episodes"] += sum(len(g) for g in groups)
            taken["turns"] += turns
            time.sleep(learner_s(args, turns))

        start = time.monotonic()
        steps = ar.run_async(
            col,
            asm,
            task_of,
            groups=args.groups,
            groups_per_step=per_step,
            learn=learn,
            weight_sync_every=args.weight_sync_every,
            prefetch_groups=args.prefetch_groups,
            timeline=tl,
            gate=gate,
        )
        end = time.monotonic()
    finally:
        if col is not None:
            col.close()
        gen.close()
        for p in pools:
            p.close()
    rep = _report(tl, start, end, n, args.gen_latency_s)
    rep["played_episodes"] = rep["episodes"]  # dropped and abandoned ones included
    rep["episodes"] = float(taken["episodes"])
    rep["episodes_per_hour"] = taken["episodes"] * 3600.0 / rep["wall_s"]
    rep["learner_steps"] = float(steps)
    rep["taken_turns_per_episode"] = taken["turns"] / max(taken["episodes"], 1)
    rep["dropped_stale"] = float(asm.stats.dropped_stale)
    rep["abandoned_stale"] = float(col.abandoned_stale if col is not None else 0)
    rep["gated_waits"] = float(col.gated_waits if col is not None else 0)
    st = asm.stats.staleness
    rep["staleness_mean"] = sum(st) / max(len(st), 1)
    rep["mean_batch"] = sum(gen.batch_sizes) / max(len(gen.batch_sizes), 1)
    rep["peak_in_flight"] = float(gen.peak_in_flight)
    return rep


ROWS = [
    ("episodes/hour", "episodes_per_hour", "{:.0f}"),
    ("episodes (to the learner)", "episodes", "{:.0f}"),
    ("turns played", "turns", "{:.0f}"),
    ("wall s", "wall_s", "{:.1f}"),
    ("desktop utilisation", "desktop_utilisation", "{:.1%}"),
    ("bound a/(a+g)", "utilisation_bound", "{:.1%}"),
    ("desktop s per turn (a)", "desktop_s_per_turn", "{:.2f}"),
    ("generator idle", "generator_idle", "{:.1%}"),
    ("learner idle", "learner_idle", "{:.1%}"),
    ("learner steps", "learner_steps", "{:.0f}"),
    ("turns per episode trained on", "taken_turns_per_episode", "{:.2f}"),
]


def pooled(runs: list[dict[str, float]]) -> dict[str, float]:
    """One mode over all rounds: sums of episodes, turns and wall time; time-weighted shares."""
    wall = sum(r["wall_s"] for r in runs)
    out = {
        "wall_s": wall,
        "episodes": sum(r["episodes"] for r in runs),
        "turns": sum(r["turns"] for r in runs),
        "learner_steps": sum(r["learner_steps"] for r in runs),
    }
    out["episodes_per_hour"] = out["episodes"] * 3600.0 / wall
    out["taken_turns_per_episode"] = (
        sum(r["taken_turns_per_episode"] * r["episodes"] for r in runs) / out["episodes"]
    )
    for k in ("desktop_utilisation", "generator_idle", "learner_idle"):
        out[k] = sum(r[k] * r["wall_s"] for r in runs) / wall
    busy = sum(r["desktop_s_per_turn"] * r["turns"] for r in runs)
    out["desktop_s_per_turn"] = busy / max(out["turns"], 1)
    g = runs[0]["desktop_s_per_turn"] / runs[0]["utilisation_bound"] - runs[0]["desktop_s_per_turn"]
    out["utilisation_bound"] = out["desktop_s_per_turn"] / (out["desktop_s_per_turn"] + g)
    for k in ("dropped_stale", "abandoned_stale", "played_episodes", "gated_waits"):
        if k in runs[0]:
            out[k] = sum(r[k] for r in runs)
    if "mean_batch" in runs[0]:
        out["mean_batch"] = sum(r["mean_batch"] for r in runs) / len(runs)
        out["peak_in_flight"] = max(r["peak_in_flight"] for r in runs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--desktops", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=2)
    ap.add_argument("--groups", type=int, default=16, help="groups to the learner per round")
    ap.add_argument(
        "--groups-per-step",
        type=int,
        default=None,
        help="groups a learner step takes (default desktops / group size; more: a step of more "
        "episodes than desktops, which sync plays as lock-step batches of `desktops` episodes)",
    )
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (each mode once)")
    ap.add_argument(
        "--lengths",
        default="1-15",
        help="episode lengths: 'lo-hi' (uniform, seeded per episode; default: issue 28's 1-15 "
        "turns) or a comma list cycled over the episodes",
    )
    ap.add_argument("--length-seed", type=int, default=0)
    ap.add_argument("--max-turns", type=int, default=None, help="default: the longest length")
    ap.add_argument("--gen-latency-s", type=float, default=1.0)
    ap.add_argument(
        "--latency-model",
        choices=["per-request", "per-call"],
        default="per-request",
        help="async generator: 'per-request' (continuous batching, as vLLM serves) or "
        "'per-call' (a batch must finish before the next starts). Sync is the same in both.",
    )
    ap.add_argument("--learn-s", type=float, default=3.0, help="learner step: fixed seconds")
    ap.add_argument(
        "--learn-s-per-turn",
        type=float,
        default=0.0,
        help="learner step: plus these seconds per turn trained on (docs/async.md derives "
        "0.71-0.89 for Qwen2.5-VL-7B's update on one H200)",
    )
    ap.add_argument("--max-staleness", type=int, default=1)
    ap.add_argument(
        "--prefetch-groups",
        type=int,
        default=None,
        help="async: groups queued ahead of the learner (default 2 x groups per step)",
    )
    ap.add_argument("--weight-sync-every", type=int, default=1)
    ap.add_argument(
        "--no-abandon",
        action="store_true",
        help="async: play episodes already too stale to train on to their end (the old loop)",
    )
    ap.add_argument(
        "--modes",
        default="sync,async",
        help="comma list of sync, async (with the version gate), async-nogate (the earlier "
        "take-whatever-is-complete loop that drops too stale groups), async@N (the gate, and "
        "the trainer's generator with N batches in flight, each paying --gen-latency-s: "
        "async_requests_in_flight=N; async@1 is async under --latency-model per-call)",
    )
    ap.add_argument("--json", help="also write every round's figures and the settings here")
    args = ap.parse_args()
    if args.desktops % args.group_size:
        raise SystemExit("--desktops must be a multiple of --group-size")
    if args.groups_per_step is None:
        args.groups_per_step = args.desktops // args.group_size
    if (args.groups_per_step * args.group_size) % args.desktops and (
        args.groups_per_step * args.group_size > args.desktops
    ):
        raise SystemExit("a step's episodes must fill whole lock-step batches of --desktops")
    lengths = Lengths(args.lengths, args.length_seed, args.group_size)
    if args.max_turns is None:
        args.max_turns = lengths.hi
    if args.max_turns < lengths.hi:
        raise SystemExit(f"--max-turns {args.max_turns} < the longest episode {lengths.hi}")
    modes = args.modes.split(",")
    in_flight = {m: in_flight_of(m) for m in modes}
    if not all(m in ("sync", "async", "async-nogate") or in_flight[m] for m in modes):
        raise SystemExit(f"--modes {args.modes!r}: use sync, async, async-nogate, async@N (N >= 1)")
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        b = build(args, tmp)
        b["lengths"] = lengths
        for r in range(args.rounds):
            for mode in modes:
                if mode == "sync":
                    rep = run_sync(b, args)
                else:
                    rep = run_async(b, args, gate=mode != "async-nogate", in_flight=in_flight[mode])
                runs[mode].append(rep)
                print(f"round {r + 1} {mode}: {rep}", flush=True)
    prefetch = args.prefetch_groups or 2 * args.groups_per_step
    print(
        f"\n{args.desktops} local desktops, groups of {args.group_size}, "
        f"{args.groups_per_step} groups ({args.groups_per_step * args.group_size} episodes) per "
        f"learner step, {args.groups} groups per "
        f"round ({args.groups * args.group_size} episodes), {args.rounds} interleaved rounds "
        f"({', '.join(modes)}, ...), max_turns {args.max_turns}; episode lengths "
        f"{lengths.describe()}; simulated: generation latency {args.gen_latency_s} s per turn "
        f"({args.latency_model}), learner step {args.learn_s} s + {args.learn_s_per_turn} s per "
        f"turn trained on; async: max_staleness "
        f"{args.max_staleness}, prefetch {prefetch} "
        f"groups, weight sync every {args.weight_sync_every} step(s), abandon stale episodes "
        f"{not args.no_abandon}\n"
    )
    print("| round | mode | " + " | ".join(label for label, _, _ in ROWS) + " |")
    print("|---:|---|" + "---:|" * len(ROWS))
    for r in range(args.rounds):
        for m in modes:
            rep = runs[m][r]
            print(f"| {r + 1} | {m} | " + " | ".join(f.format(rep[k]) for _, k, f in ROWS) + " |")
    table = {m: pooled(runs[m]) for m in modes}
    print("\nPooled over the rounds:\n")
    print("| | " + " | ".join(modes) + " |")
    print("|---|" + "---:|" * len(modes))
    for label, key, fmt in ROWS:
        print(f"| {label} | " + " | ".join(fmt.format(table[m][key]) for m in modes) + " |")
    for m in modes:
        if m == "sync":
            continue
        a = table[m]
        print(
            f"\n{m}: {a['played_episodes']:.0f} episodes played for {a['episodes']:.0f} taken, "
            f"{a['dropped_stale']:.0f} groups dropped as stale, {a['abandoned_stale']:.0f} "
            f"episodes abandoned as stale, {a['gated_waits']:.0f} episode starts waited at the "
            f"version gate, mean batch {a['mean_batch']:.2f}, at most {a['peak_in_flight']:.0f} "
            "batch(es) in flight"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"settings": vars(args), "rounds": runs, "pooled": table}, fh, indent=1)
    for m in modes:
        if m == "sync" or "sync" not in table:
            continue
        ratios = [
            runs[m][r]["episodes_per_hour"] / runs["sync"][r]["episodes_per_hour"]
            for r in range(args.rounds)
        ]
        pooled_ratio = table[m]["episodes_per_hour"] / table["sync"]["episodes_per_hour"]
        print(
            f"{m} / sync episodes per hour: per round "
            + ", ".join(f"{x:.2f}x" for x in ratios)
            + f"; pooled {pooled_ratio:.2f}x"
        )


if __name__ == "__main__":
    main()
