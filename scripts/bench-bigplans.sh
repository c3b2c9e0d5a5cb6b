#!/usr/bin/env bash
# Whole-process benchmark of big plans (DESIGN §8, "Big plans"; issue 9):
# `ralph task list --json` and `ralph task list` at 10,000, 100,000 and
# 1,000,000 tasks — wall time (hyperfine) at 100,000, peak RSS at every
# size — and `ralph task import` of 1,000,000 tasks: wall time and peak
# RSS. Targets: list --json of 100k ≤ 250 ms with memory flat from 10k to
# 1M; import of 1M < 10 s and < 300 MB (well under the file's 165 MB).
#
# Usage: scripts/bench-bigplans.sh [WORKDIR]   (needs go, hyperfine and GNU time)
#        BASE=/path/to/other/ralph scripts/bench-bigplans.sh   also measures
#        that binary on the same plans (e.g. one built from an older commit)
#
# The plans are bench-peek.sh's (awk with a fixed seed): every task pending,
# 30% with one blocker (an earlier task), 10% with a parent (a later task,
# so that parents come after their children in the file), priorities
# uniform in 0..4.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
command -v hyperfine >/dev/null || { echo "bench-bigplans: hyperfine is needed (apt-get install -y hyperfine)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-bigplans: GNU time is needed (apt-get install -y time)" >&2; exit 1; }

bin="$work/ralph"
go build -o "$bin" ./cmd/ralph
bins=("$bin")
[ -n "${BASE:-}" ] && bins+=("$BASE")

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

# rss CMD…: runs CMD, its output discarded, and prints "<seconds> s, <peak RSS> MB".
rss() {
  /usr/bin/time -f '%e %M' -o "$work/time.txt" "$@" >/dev/null
  awk '{ printf "%.2f s, %.1f MB\n", $1, $2 / 1024 }' "$work/time.txt"
}

for n in 10000 100000 1000000; do
  [ -s "$work/plan-$n.jsonl" ] || gen "$n" >"$work/plan-$n.jsonl"
done
ls -l "$work"/plan-*.jsonl

for b in "${bins[@]}"; do
  tag=$(basename "$b")
  echo "== $b"
  echo "-- import (one run each, to build the plans; peak RSS)"
  for n in 10000 100000 1000000; do
    d="$work/$tag-p$n"
    rm -rf "$d" && mkdir -p "$d"
    "$b" --dir "$d" init >/dev/null
    printf '%-9s import: ' "$n"
    rss "$b" --dir "$d" task import "$work/plan-$n.jsonl"
  done
  "$b" --dir "$work/$tag-p1000000" task plan-status

  echo "-- import of 1,000,000 tasks (hyperfine, 3 runs)"
  hyperfine -N --runs 3 \
    --prepare "sh -c 'rm -rf $work/$tag-imp && mkdir $work/$tag-imp && $b --dir $work/$tag-imp init >/dev/null'" \
    --export-markdown "$work/$tag-import.md" \
    "$b --dir $work/$tag-imp task import $work/plan-1000000.jsonl"

  echo "-- task list --json of 100,000 tasks (hyperfine)"
  hyperfine -N --warmup 3 --min-runs 20 \
    --export-markdown "$work/$tag-list.md" \
    "$b --dir $work/$tag-p100000 task list --json" \
    "$b --dir $work/$tag-p100000 task list"

  echo "-- task list, peak RSS by plan size"
  for n in 10000 100000 1000000; do
    printf '%-9s list --json: ' "$n"
    rss "$b" --dir "$work/$tag-p$n" task list --json
    printf '%-9s list:        ' "$n"
    rss "$b" --dir "$work/$tag-p$n" task list
  done
done
echo "results in $work (*.md: hyperfine tables)"
