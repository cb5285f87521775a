#!/usr/bin/env bash
# The history check (history/): for each seed, history_driver runs the
# workers on one lock against a persisting Redis for S seconds under faults,
# then history_check judges every record and prints its figures and the
# totals. Exits non-zero on any violation (an unexcused overlap, a fencing
# token repeated or going down, a counter that does not add up), an
# incomplete record, or a driver that failed.
#
#   ./scripts/history.sh [--seconds 60] [--seeds 5] [--workers 5] [--first-seed 1] [--dir build/history-records]
#
# Records stay in DIR/seed-N (driver.log, w1.log, ...) for a closer look.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=60 seeds=5 workers=5 first_seed=1 dir=build/history-records
usage() { echo "usage: $0 [--seconds S] [--seeds N] [--workers W] [--first-seed X] [--dir DIR]" >&2; exit 64; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    --seconds) seconds="$2" ;;
    --seeds) seeds="$2" ;;
    --workers) workers="$2" ;;
    --first-seed) first_seed="$2" ;;
    --dir) dir="$2" ;;
    *) usage ;;
  esac
  shift 2
done
for n in "$seconds" "$seeds" "$workers" "$first_seed"; do [[ "$n" =~ ^[0-9]+$ ]] || usage; done

# On a fresh machine set up first; otherwise just bring the three programs up to date.
if command -v redis-server >/dev/null && command -v cmake >/dev/null && pkg-config --exists hiredis 2>/dev/null; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_WERROR=ON >/dev/null
else
  source scripts/setup.sh
fi
cmake --build build -j"$(nproc)" --target history_driver history_worker history_check >/dev/null

records=()
driver_failed=0
for ((seed = first_seed; seed < first_seed + seeds; seed++)); do
  record="$dir/seed-$seed"
  records+=("$record")
  echo "history: seed $seed, $workers workers, $seconds s"
  build/history/history_driver --dir "$record" --seconds "$seconds" --workers "$workers" --seed "$seed" ||
    { echo "history: the driver of seed $seed failed" >&2; driver_failed=1; }
done

echo "history: ./scripts/history.sh --seconds $seconds --seeds $seeds --workers $workers --first-seed $first_seed"
status=0
build/history/history_check "${records[@]}" || status=$?
[ "$driver_failed" -eq 0 ] || status=1
exit "$status"
