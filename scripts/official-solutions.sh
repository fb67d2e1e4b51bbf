#!/usr/bin/env bash
# The official-task solution set (tests/official_solutions.py), every domain in turn, each in its
# own pytest run on a fresh desktop, then a table: per domain, how many correct answers scored 1
# and how many wrong answers scored 0. CI runs a sample of it (2 tasks); this runs all of it.
#
#   bash scripts/official-solutions.sh                     # all domains
#   bash scripts/official-solutions.sh os chrome           # some domains
#   REPORT=runs/solutions.jsonl bash scripts/official-solutions.sh
#
# OSWORLD_EXAMPLES names the official task folder (default ../shared/osworld/evaluation_examples);
# OSWORLD_SOLUTIONS_SHOTS=DIR keeps every observation. Exit status: 1 if any episode failed.
set -uo pipefail
cd "$(dirname "$0")/.."
domains=("$@")
if [ ${#domains[@]} = 0 ]; then
  domains=(os chrome gimp libreoffice_calc libreoffice_impress libreoffice_writer multi_apps
    thunderbird vlc)
fi
report="${REPORT:-$(mktemp --suffix=.jsonl)}"
# each domain's pytest temp folder, kept: an episode that scores unexpectedly saves its
# screenshots there (the failure message names the folder)
temp="$(mktemp -d --suffix=-official-solutions)"
rc=0
for d in "${domains[@]}"; do
  OSWORLD_SOLUTIONS=all OSWORLD_SOLUTIONS_REPORT="$report" \
    uv run --frozen pytest -q -p no:cacheprovider --basetemp "$temp/$d" \
    tests/osworld_gym/support/test_official_solutions.py -k "$d/" || rc=1
done
uv run --frozen python - "$report" <<'PY'
import json
import sys
from collections import defaultdict

rows = [json.loads(line) for line in open(sys.argv[1])]
by = defaultdict(lambda: {"tasks": set(), "correct": [0, 0], "wrong": [0, 0]})
for r in rows:
    d = by[r["domain"]]
    d["tasks"].add(r["id"])
    want = 1.0 if r["variant"] == "correct" else 0.0
    d[r["variant"]][0] += r["reward"] == want and r["error"] is None
    d[r["variant"]][1] += 1
print("| domain | tasks | correct -> 1 | wrong -> 0 |")
print("|---|---:|---:|---:|")
total = {"tasks": 0, "correct": [0, 0], "wrong": [0, 0]}
for name in sorted(by):
    d = by[name]
    print(f"| {name} | {len(d['tasks'])} | {d['correct'][0]} / {d['correct'][1]} "
          f"| {d['wrong'][0]} / {d['wrong'][1]} |")
    total["tasks"] += len(d["tasks"])
    for k in ("correct", "wrong"):
        total[k] = [a + b for a, b in zip(total[k], d[k])]
print(f"| **all** | **{total['tasks']}** | **{total['correct'][0]} / {total['correct'][1]}** "
      f"| **{total['wrong'][0]} / {total['wrong'][1]}** |")
for r in rows:
    want = 1.0 if r["variant"] == "correct" else 0.0
    if r["reward"] != want or r["error"] is not None:
        print(f"- {r['domain']}/{r['id'][:8]} {r['variant']}: scored {r['reward']} "
              f"({r['error'] or 'no error'})")
PY
echo "episodes: $report; screenshots of unexpected scores: $temp"
exit $rc
