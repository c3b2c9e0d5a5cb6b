#!/bin/sh
# The stand-in agent of the whole-process benchmarks (bench-workers.sh,
# bench-critical-path.sh): it reads its prompt, works 1 s on the task
# (sleeps, then writes a file named after it), and answers in Claude
# Code's stream-json with the task-done sigil.
cat >/dev/null
sleep 1
echo "work of $RALPH_TASK_ID" > "$RALPH_TASK_ID.txt"
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$RALPH_TASK_ID"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. <task-done>%s</task-done>","session_id":"s-%s","num_turns":1,"total_cost_usd":0}\n' "$RALPH_TASK_ID" "$RALPH_TASK_ID"
