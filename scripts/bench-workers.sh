#!/usr/bin/env bash
# Whole-process benchmark of parallel workers (DESIGN §9; issue 10): 40
# independent tasks, a stand-in agent that works 1 s on each (it sleeps,
# then writes a file), `ralph build` with --workers 1, 4 and 8 on a git
# repository of a few files. The ideal with 4 workers is 10 s of agent time;
# the target is a wall time ≤ 11.5 s (85% of the ideal speed-up), and 8
# workers no slower than 4 on a 2-core machine.
#
# Usage: scripts/bench-workers.sh [WORKDIR]   (needs go, git and hyperfine)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
command -v hyperfine >/dev/null || { echo "bench-workers: hyperfine is needed (apt-get install -y hyperfine)" >&2; exit 1; }
bin="$work/ralph"
go build -o "$bin" ./cmd/ralph

agent="$PWD/scripts/bench-agent.sh" # the 1-second stand-in
for i in $(seq -w 1 40); do printf '{"id":"t%s","title":"Task %s"}\n' "$i" "$i"; done >"$work/plan.jsonl"

# prepare DIR: a fresh repository with the plan imported.
cat >"$work/prepare.sh" <<PREP
#!/bin/sh
set -e
rm -rf "\$1" && mkdir -p "\$1" && cd "\$1"
git init -q -b main && echo project > README
git -c user.name=b -c user.email=b@example.com commit -q --allow-empty -m empty
git add README && git -c user.name=b -c user.email=b@example.com commit -q -m readme
"$bin" init >/dev/null && "$bin" task import "$work/plan.jsonl" >/dev/null
PREP
chmod +x "$work/prepare.sh"

export RALPH_AGENT_ID= RALPH_HOLDER= RALPH_DIR=
hyperfine --runs 3 --export-markdown "$work/workers.md" \
  --prepare "$work/prepare.sh $work/p" \
  -n "workers 1" "$bin --dir $work/p build --workers 1 --max-iterations 100 --claude $agent" \
  -n "workers 4" "$bin --dir $work/p build --workers 4 --max-iterations 100 --claude $agent" \
  -n "workers 8" "$bin --dir $work/p build --workers 8 --max-iterations 100 --claude $agent"
echo "results in $work/workers.md"
