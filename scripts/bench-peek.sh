#!/usr/bin/env bash
# Whole-process benchmark of `ralph task peek -n 10` on generated plans of
# 10,000 and 100,000 tasks, against `ralph --version` as the baseline, and
# of `ralph task import` of 100,000 tasks. Issue 2's targets: peek at most
# 2x (10k) and 3x (100k) the wall time of --version.
#
# Usage: scripts/bench-peek.sh [WORKDIR]   (needs go and hyperfine)
#
# The plans are reproducible (awk with a fixed seed): every task pending,
# 30% with one blocker (an earlier task), 10% with a parent (a later task,
# so that no chain of waits can loop), priorities uniform in 0..4.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
command -v hyperfine >/dev/null || { echo "bench-peek: hyperfine is needed (apt-get install -y hyperfine)" >&2; exit 1; }

bin="$work/ralph"
go build -o "$bin" ./cmd/ralph

gen() { # gen N: a plan of N tasks as JSON Lines
  awk -v n="$1" 'BEGIN {
    srand(42)
    for (i = 1; i <= n; i++) {
      blk = ""; par = "null"
      if (i > 1 && rand() < 0.3) blk = "\"t" (1 + int(rand() * (i - 1))) "\""
      if (i < n && rand() < 0.1) par = "\"t" (i + 1 + int(rand() * (n - i))) "\""
      printf "{\"id\":\"t%d\",\"title\":\"Task %d\",\"description\":\"Generated task %d of the peek benchmark.\",\"priority\":%d,\"parent\":%s,\"blocked_by\":[%s],\"status\":\"pending\"}\n", i, i, i, int(rand() * 5), par, blk
    }
  }'
}

for n in 10000 100000; do
  gen "$n" >"$work/plan-$n.jsonl"
  rm -rf "$work/p$n" && mkdir -p "$work/p$n"
  "$bin" --dir "$work/p$n" init >/dev/null
  "$bin" --dir "$work/p$n" task import "$work/plan-$n.jsonl"
  "$bin" --dir "$work/p$n" task plan-status
done

echo "== peek"
hyperfine -N --warmup 5 --min-runs 100 \
  --export-markdown "$work/peek.md" --export-json "$work/peek.json" \
  "$bin --version" \
  "$bin --dir $work/p10000 task peek -n 10" \
  "$bin --dir $work/p100000 task peek -n 10"

echo "== import of 100,000 tasks"
hyperfine -N --runs 3 \
  --prepare "sh -c 'rm -rf $work/imp && mkdir $work/imp && $bin --dir $work/imp init >/dev/null'" \
  --export-markdown "$work/import.md" \
  "$bin --dir $work/imp task import $work/plan-100000.jsonl"

# Ratios to --version of the median and of the minimum: on a shared machine
# the mean is at the mercy of the neighbours.
echo "== peek / --version"
awk -F': ' '
  /"command"/ { gsub(/[",]/, "", $2); cmd = $2 }
  /"median"/  { gsub(/,/, "", $2); med[++n] = $2; name[n] = cmd }
  /"min"/     { gsub(/,/, "", $2); lo[n] = $2 }
  END {
    for (i = 1; i <= n; i++)
      printf "%-60s median %6.2f ms (%.2fx)  min %6.2f ms (%.2fx)\n", name[i], med[i] * 1000, med[i] / med[1], lo[i] * 1000, lo[i] / lo[1]
  }' "$work/peek.json"

echo "results in $work/peek.md, $work/peek.json and $work/import.md"
