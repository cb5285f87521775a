#!/usr/bin/env bash
# The chaos soak (not part of CI): many rounds of the multi-process flash sale
# with its lock holders SIGKILLed, hundreds of kills in all. Builds first.
#   ./scripts/soak.sh [ROUNDS] [KILLS_PER_ROUND]     default 50 rounds x 6 kills = 300 kills
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup.sh
export DLOCK_CHAOS_ROUNDS="${1:-50}"
export DLOCK_CHAOS_KILLS="${2:-6}"
export DLOCK_CHAOS_STOCK="${DLOCK_CHAOS_STOCK:-500}"
echo "soak: ${DLOCK_CHAOS_ROUNDS} rounds x ${DLOCK_CHAOS_KILLS} kills, stock ${DLOCK_CHAOS_STOCK} per round"
exec build/tests/faults/test_fault_chaos --success --reporter compact "[chaos]"
