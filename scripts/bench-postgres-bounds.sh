#!/usr/bin/env bash
# What bounds the PostgreSQL store's claim rate (issue 25), measured without
# ralph's client: pgbench (C, prepared statements, 8 clients, 2 threads)
# runs the statements of a claim and its completion as ralph sends them, on
# a plan of 100,000 independent tasks that ralph made, in variants that
# show what each part costs. One "transaction" of pgbench's here is a claim
# and its completion: its tps is claims per second. Variants:
#
#   ralph     the statements as ralph runs them: the claim (no plan lock)
#             and the completion under the plan lock's shared form
#   quiet     "ralph" with the notification triggers disabled (nobody
#             waiting: no NOTIFY to queue commits behind each other)
#   whole     the same, the completion under the whole plan lock (before
#             issue 25)
#   one       a claim and a completion of one statement each (the history
#             entry written in the same statement), no explicit
#             transaction: what one round trip each would give
#   one-quiet "one" with the notification triggers disabled
#   one-bare  "one" with every trigger off (no counts, no notifications)
#
# Usage: scripts/bench-postgres-bounds.sh [WORKDIR]   (needs go, git,
# pgbench and psql; $RALPH_TEST_PG, else a throwaway cluster from
# scripts/pgtest.sh; VARIANTS picks some; SECONDS_EACH, default 8)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
mkdir -p "$work"
variants=${VARIANTS:-ralph quiet whole one one-quiet one-bare}
secs=${SECONDS_EACH:-8}
if [ -z "${RALPH_TEST_PG:-}" ]; then
  eval "$(scripts/pgtest.sh start)"
  trap 'scripts/pgtest.sh stop' EXIT
fi
if [ -n "${RALPH_TEST_PG_DIR:-}" ] && [ -f "$RALPH_TEST_PG_DIR/bindir" ]; then
  pgbin=$(cat "$RALPH_TEST_PG_DIR/bindir")
else
  pgbin=$(dirname "$(command -v pgbench)")
fi
export PGOPTIONS="-c client_min_messages=warning"
go build -o "$work/ralph" ./cmd/ralph
awk 'BEGIN { for (i = 1; i <= 100000; i++) printf "{\"id\":\"t%d\",\"title\":\"Task %d\"}\n", i, i }' >"$work/plan.jsonl"
rm -rf "$work/proj" && mkdir -p "$work/proj" && git -C "$work/proj" init -q

ready="status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0"
claim_set="status = 'in_progress', claimed_by = 'ag', claimed_at = 1, lease_expires_at = 9000000000000000000,
  updated_at = 1, claim_mode = 'loop', holder_host = 'h', holder_pid = 1, holder_start = 1,
  generation = generation + 1, raced = 0"
claim_where="seq = (SELECT seq FROM tasks WHERE $ready ORDER BY priority, raced DESC, chain DESC, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
  AND NOT EXISTS (SELECT 1 FROM tasks WHERE status = 'in_progress' AND lease_expires_at <= 5)"
done_set="status = 'done', updated_at = 2, claimed_by = '', claimed_at = 0, lease_expires_at = 0, claim_mode = '',
  holder_host = '', holder_pid = 0, holder_start = 0"
done_where="id = :id AND status = 'in_progress' AND claimed_by = 'ag' AND generation = 1
  AND NOT EXISTS (SELECT 1 FROM tasks WHERE status = 'in_progress' AND lease_expires_at <= 5)"
logcols="task_id, seq, at, kind, message, actor"
cols="id, title, description, status, priority, coalesce(parent_id, ''), coalesce(feature, ''), claimed_by,
  claimed_at, lease_expires_at, retry_count, verification_status, created_at, updated_at, claim_mode,
  holder_host, holder_pid, holder_start, generation, blocker_count, check_cmd, check_by"

# script LOCKFN: ralph's statements, the completion under LOCKFN.
script() {
  cat <<SQL
BEGIN;
UPDATE tasks SET $claim_set WHERE $claim_where RETURNING $cols, pg_current_xact_id()::text AS xid \gset
INSERT INTO task_logs ($logcols) SELECT :id, coalesce(max(seq), 0) + 1, 1, 'claim', 'claimed by ag (claim 1, by the loop, holder 1)', 'ag' FROM task_logs WHERE task_id = :id;
COMMIT;
BEGIN;
SELECT pg_current_xact_id()::text FROM (SELECT $1(1380011088, :plan)) AS l;
UPDATE tasks SET $done_set WHERE $done_where RETURNING coalesce(parent_id, ''), dependent_count;
INSERT INTO task_logs ($logcols) SELECT :id, coalesce(max(seq), 0) + 1, 2, 'done', 'done by ag', 'ag' FROM task_logs WHERE task_id = :id;
COMMIT;
SQL
}
one() {
  cat <<SQL
WITH c AS (UPDATE tasks SET $claim_set WHERE $claim_where RETURNING $cols),
  l AS (INSERT INTO task_logs ($logcols) SELECT c.id, coalesce((SELECT max(seq) FROM task_logs WHERE task_id = c.id), 0) + 1,
    1, 'claim', 'claimed by ag (claim ' || c.generation || ', by the loop, holder 1)', 'ag' FROM c)
SELECT *, pg_current_xact_id()::text AS xid FROM c \gset
WITH d AS (UPDATE tasks SET $done_set WHERE $done_where RETURNING id, coalesce(parent_id, ''), dependent_count),
  l AS (INSERT INTO task_logs ($logcols) SELECT d.id, coalesce((SELECT max(seq) FROM task_logs WHERE task_id = d.id), 0) + 1,
    2, 'done', 'done by ag', 'ag' FROM d)
SELECT * FROM d;
SQL
}
for v in $variants; do
  plan="bounds-$v-$(date +%s%N)"
  "$work/ralph" --dir "$work/proj" --db "$RALPH_TEST_PG" --plan "$plan" init >/dev/null
  "$work/ralph" --dir "$work/proj" --db "$RALPH_TEST_PG" --plan "$plan" task import "$work/plan.jsonl" >/dev/null
  id=$("$pgbin/psql" -X -At -d "$RALPH_TEST_PG" -c "SELECT id FROM ralph.plans WHERE name = '$plan'")
  opts="-c search_path=ralph_plan_$id -c client_min_messages=warning"
  case $v in
    ralph) script pg_advisory_xact_lock_shared >"$work/$v.sql" ;;
    whole) script pg_advisory_xact_lock >"$work/$v.sql" ;;
    one) one >"$work/$v.sql" ;;
    quiet | one-quiet)
      if [ "$v" = quiet ]; then script pg_advisory_xact_lock_shared >"$work/$v.sql"; else one >"$work/$v.sql"; fi
      "$pgbin/psql" -X -q -d "$RALPH_TEST_PG" -c "ALTER TABLE ralph_plan_$id.tasks DISABLE TRIGGER tasks_notify_update" \
        -c "ALTER TABLE ralph_plan_$id.tasks DISABLE TRIGGER tasks_notify_claim" ;;
    one-bare) one >"$work/$v.sql"; opts="$opts -c session_replication_role=replica" ;;
    *) echo "bench-postgres-bounds: no variant $v" >&2; exit 2 ;;
  esac
  tps=$(PGOPTIONS="$opts" "$pgbin/pgbench" -n -M prepared -D plan="$id" -f "$work/$v.sql" -c 8 -j 2 -T "$secs" "$RALPH_TEST_PG" 2>"$work/$v.err" |
    awk '/^tps/ {print $3}') || true
  [ -n "$tps" ] || { cat "$work/$v.err" >&2; exit 1; }
  printf '%-10s %6.0f claims+completions/s\n' "$v" "$tps"
  "$pgbin/psql" -X -q -d "$RALPH_TEST_PG" -c "DROP SCHEMA ralph_plan_$id CASCADE" -c "DELETE FROM ralph.plans WHERE id = $id" >/dev/null
done
