#!/usr/bin/env bash
# Whole-process benchmark of the order of ready tasks (DESIGN §17; issue
# 25): 24 independent tasks created first, then one chain of 8 (each
# blocked by the one before), a stand-in agent that works 1 s on each,
# `ralph build --workers 4` on a git repository of a few files. The bound is
# 8 s (the chain's length; 32 s of work over 4 workers); the target is
# within 15%, ≤ 9.2 s, on SQLite and on PostgreSQL. Workers that took ready
# tasks by priority then age started the chain only once the wide tasks
# were gone (16.5 s; README, "Speed and memory").
#
# Usage: scripts/bench-critical-path.sh [WORKDIR]
#   (needs go, git and hyperfine; with $RALPH_TEST_PG set — a postgres://
#   URL, as scripts/pgtest.sh start prints — the plan on PostgreSQL too)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
command -v hyperfine >/dev/null || { echo "bench-critical-path: hyperfine is needed (apt-get install -y hyperfine)" >&2; exit 1; }
bin="$work/ralph"
go build -o "$bin" ./cmd/ralph

agent="$PWD/scripts/bench-agent.sh" # the 1-second stand-in
{
  for i in $(seq -w 1 24); do printf '{"id":"w%s","title":"Wide %s"}\n' "$i" "$i"; done
  printf '{"id":"c1","title":"Chain 1"}\n'
  for i in $(seq 2 8); do printf '{"id":"c%d","title":"Chain %d","blocked_by":["c%d"]}\n' "$i" "$i" $((i - 1)); done
} >"$work/plan.jsonl"

# prepare DIR [DB]: a fresh repository with the plan imported (on DB, a
# fresh plan of the server, when given).
cat >"$work/prepare.sh" <<PREP
#!/bin/sh
set -e
rm -rf "\$1" && mkdir -p "\$1" && cd "\$1"
git init -q -b main && echo project > README
git -c user.name=b -c user.email=b@example.com commit -q --allow-empty -m empty
git add README && git -c user.name=b -c user.email=b@example.com commit -q -m readme
if [ -n "\${2:-}" ]; then
  plan="cp-\$(date +%s%N)"
  echo "\$plan" > "$work/plan-name"
  "$bin" --db "\$2" --plan "\$plan" init >/dev/null
  "$bin" --db "\$2" --plan "\$plan" task import "$work/plan.jsonl" >/dev/null
else
  "$bin" init >/dev/null && "$bin" task import "$work/plan.jsonl" >/dev/null
fi
PREP
chmod +x "$work/prepare.sh"

export RALPH_AGENT_ID= RALPH_HOLDER= RALPH_DIR= RALPH_DB= RALPH_PLAN=
build="build --workers 4 --max-iterations 100 --claude $agent"
hyperfine --runs 3 --export-markdown "$work/sqlite.md" \
  --prepare "$work/prepare.sh $work/p" \
  -n "24 wide + chain of 8, --workers 4, SQLite" "$bin --dir $work/p $build"
if [ -n "${RALPH_TEST_PG:-}" ]; then
  hyperfine --runs 3 --export-markdown "$work/postgres.md" \
    --prepare "$work/prepare.sh $work/q $RALPH_TEST_PG" \
    -n "24 wide + chain of 8, --workers 4, PostgreSQL" \
    "$bin --dir $work/q --db $RALPH_TEST_PG --plan \$(cat $work/plan-name) $build"
fi
echo "results in $work/*.md"
