#!/usr/bin/env bash
# The PostgreSQL store's speed targets (issue 11), measured on one server
# and one machine:
#
#  1. 8 processes claiming and completing from one plan: the Go benchmark
#     BenchmarkClaimProcesses/8 of dag/postgres (10,000 tasks; it checks
#     that no task is claimed twice and none is missed), beside
#     `pgbench -N -c 8 -j 2 -T 10` (simple-update, scale 1, in a database of
#     its own) on the same server. Target: claims/s ≥ 50% of pgbench's
#     transactions/s (a claim and its completion are two transactions).
#  2. `ralph task peek -n 10` on a 100,000-task plan, whole process. Target:
#     ≤ 3× (`ralph --version` + one connection's set-up). The set-up is
#     timed with scripts/pgconnect, a Go process that opens one connection
#     as ralph's store does (postgres.ParseURL, pgx) and runs SELECT 1, less
#     the same program started without a URL (which exits at once): what
#     connecting adds to a process, not a second process start.
#
# Usage: scripts/bench-postgres.sh [WORKDIR]
#
# Needs go, hyperfine and PostgreSQL's client programs (pgbench, psql). The
# server is $RALPH_TEST_PG (a postgres:// URL whose user may create
# databases); without it a throwaway cluster is started with
# scripts/pgtest.sh and stopped at the end. ROUNDS (default 3) rounds run
# pgbench and the claim benchmark alternately, and hyperfine's set as many
# times, so that each ratio compares minutes with the same neighbours on a
# shared machine. PARTS (default "claims peek") picks the parts to run.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
rounds=${ROUNDS:-3}
parts=${PARTS:-claims peek}
command -v hyperfine >/dev/null || { echo "bench-postgres: hyperfine is needed (apt-get install -y hyperfine)" >&2; exit 1; }

if [ -z "${RALPH_TEST_PG:-}" ]; then
  eval "$(scripts/pgtest.sh start)"
  trap 'scripts/pgtest.sh stop' EXIT
fi
export RALPH_TEST_PG
# PostgreSQL's client programs: the test cluster's, else on PATH, else
# Debian's.
if [ -n "${RALPH_TEST_PG_DIR:-}" ] && [ -f "$RALPH_TEST_PG_DIR/bindir" ]; then
  pgbin=$(cat "$RALPH_TEST_PG_DIR/bindir")
elif command -v pgbench >/dev/null; then
  pgbin=$(dirname "$(command -v pgbench)")
else
  pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
fi
[ -x "$pgbin/pgbench" ] || { echo "bench-postgres: no pgbench (apt-get install postgresql-client)" >&2; exit 1; }
export PGOPTIONS="-c client_min_messages=warning"

# dburl NAME: $RALPH_TEST_PG with its database replaced by NAME.
dburl() { printf '%s\n' "$RALPH_TEST_PG" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$1#"; }
# drop NAME: drop the database NAME (the benchmark's own).
drop() { "$pgbin/psql" -X -q -d "$RALPH_TEST_PG" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" >/dev/null; }
# fresh NAME: (re)make the empty database NAME; prints its URL.
fresh() {
  drop "$1"
  "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -d "$RALPH_TEST_PG" -c "CREATE DATABASE $1" >/dev/null
  dburl "$1"
}

claims() {
  echo "== 1. 8 processes claiming + completing, beside pgbench -N"
  pgb=$(fresh ralph_bench_pgbench)
  "$pgbin/pgbench" -i -s 1 -q "$pgb" >"$work/pgbench-init.log" 2>&1
  go test -c -o "$work/postgres.test" ./dag/postgres/
  : >"$work/claims.txt"
  for r in $(seq "$rounds"); do
    "$pgbin/pgbench" -N -c 8 -j 2 -T 10 "$pgb" >"$work/pgbench-$r.log" 2>&1
    tps=$(awk '/^tps/ {print $3}' "$work/pgbench-$r.log")
    (cd dag/postgres && "$work/postgres.test" -test.run '^$' -test.bench 'ClaimProcesses/8$' -test.benchtime 1x) >"$work/claims-$r.log" 2>&1 ||
      { cat "$work/claims-$r.log" >&2; exit 1; }
    claims=$(awk '{for (i = 2; i <= NF; i++) if ($i == "claims/s") print $(i-1)}' "$work/claims-$r.log")
    echo "$tps $claims" >>"$work/claims.txt"
    awk -v r="$r" -v t="$tps" -v c="$claims" \
      'BEGIN {printf "round %d: pgbench -N %6.0f tps   8 processes %6.0f claims/s   %4.1f%% of pgbench (target 50%%)\n", r, t, c, 100 * c / t}'
  done
  awk '
    NR == 1 { tlo = thi = $1; clo = chi = $2; rlo = rhi = $2 / $1 }
    { tlo = ($1 < tlo ? $1 : tlo); thi = ($1 > thi ? $1 : thi); clo = ($2 < clo ? $2 : clo); chi = ($2 > chi ? $2 : chi)
      r = $2 / $1; rlo = (r < rlo ? r : rlo); rhi = (r > rhi ? r : rhi) }
    END { printf "pgbench -N -c 8: %.0f–%.0f tps; 8 processes: %.0f–%.0f claims/s; claims/s of pgbench tps: %.1f–%.1f%% (target ≥ 50%%)\n", tlo, thi, clo, chi, 100 * rlo, 100 * rhi }
  ' "$work/claims.txt"
  drop ralph_bench_pgbench
}

peek() {
  echo "== 2. task peek -n 10 on 100,000 tasks"
  go build -o "$work/ralph" ./cmd/ralph
  go build -o "$work/pgconnect" ./scripts/pgconnect
  # The plan of scripts/bench-peek.sh (awk with a fixed seed): every task
  # pending, 30% with one blocker (an earlier task), 10% with a parent (a later
  # task), priorities uniform in 0..4.
  awk -v n=100000 'BEGIN {
    srand(42)
    for (i = 1; i <= n; i++) {
      blk = ""; par = "null"
      if (i > 1 && rand() < 0.3) blk = "\"t" (1 + int(rand() * (i - 1))) "\""
      if (i < n && rand() < 0.1) par = "\"t" (i + 1 + int(rand() * (n - i))) "\""
      printf "{\"id\":\"t%d\",\"title\":\"Task %d\",\"description\":\"Generated task %d of the peek benchmark.\",\"priority\":%d,\"parent\":%s,\"blocked_by\":[%s],\"status\":\"pending\"}\n", i, i, i, int(rand() * 5), par, blk
    }
  }' >"$work/plan-100000.jsonl"
  peekdb=$(fresh ralph_bench_peek)
  proj="$work/proj"
  rm -rf "$proj" && mkdir -p "$proj"
  "$work/ralph" --dir "$proj" --db "$peekdb" --plan bench init >/dev/null
  start=$(date +%s.%N)
  "$work/ralph" --dir "$proj" --db "$peekdb" --plan bench task import "$work/plan-100000.jsonl"
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "import of 100,000 tasks: %.2f s\n", b - a}'
  "$work/ralph" --dir "$proj" --db "$peekdb" --plan bench task plan-status

  peek="$work/ralph --dir $proj --db $peekdb --plan bench task peek -n 10"
  for r in $(seq "$rounds"); do
    hyperfine -N --warmup 5 --min-runs 100 \
      --export-json "$work/peek-$r.json" --export-markdown "$work/peek-$r.md" \
      "$work/ralph --version" "$work/pgconnect" "$work/pgconnect $peekdb" "$peek" >"$work/peek-$r.log" 2>&1
    # Medians (the mean is at the mercy of the neighbours) and minimums.
    awk -v r="$r" -F': ' '
      /"median"/ { gsub(/,/, "", $2); med[++n] = $2 * 1000 }
      /"min"/    { gsub(/,/, "", $2); lo[n] = $2 * 1000 }
      END {
        conn = med[3] - med[2]; connlo = lo[3] - lo[2]
        printf "round %d, median (min) ms: --version %.2f (%.2f); connection set-up %.2f (%.2f) [pgconnect %.2f (%.2f) less its start %.2f (%.2f)]; peek %.2f (%.2f); peek / (version + connection) = %.2fx (%.2fx); target ≤ 3x\n",
          r, med[1], lo[1], conn, connlo, med[3], lo[3], med[2], lo[2], med[4], lo[4], med[4] / (med[1] + conn), lo[4] / (lo[1] + connlo)
      }' "$work/peek-$r.json"
  done
  drop ralph_bench_peek
}

for part in $parts; do "$part"; done
echo "results in $work: claims-*.log, pgbench-*.log, peek-*.md, peek-*.json"
