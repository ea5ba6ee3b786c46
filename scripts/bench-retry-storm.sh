#!/usr/bin/env bash
# Retry storm (issue 25 item 1): per job, under 10 minutes of RunTask throttling in fake
# time, the launch attempts, RunTask calls, queue messages sent and the job item's size,
# after the fix, and the same figures modelled for the code before it (a 0-delay message
# per refusal, two transitions appended per cycle).
#
#   scripts/bench-retry-storm.sh
#
# Runs crates/lifecycle/tests/it/retry_storm.rs's `ten_minutes_of_throttling_cost_at_most_eleven_attempts_and_a_2_kb_item`
# (in memory: no moto needed) and prints its tables.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cargo test -p sortie-lifecycle --test it -- --exact \
  retry_storm::ten_minutes_of_throttling_cost_at_most_eleven_attempts_and_a_2_kb_item --nocapture 2>&1 \
  | sed -n '/^10 minutes of RunTask throttling/,/^test /p' | sed '$d'
