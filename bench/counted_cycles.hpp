#pragma once
// An exact number of lock cycles, for instruction counts (bench/callgrind.sh
// runs this under callgrind, or beside a redis-server under callgrind, at
// two counts: the difference over the difference of counts is the cost of
// one cycle, start-up and shut-down cancelled out).

#include <string>

#include "bench_target.hpp"

namespace bench {

// `count` cycles of the named client (see lock_cycle_names()). With threads > 1
// (dlock only): that many threads of one service, `count` cycles each, all on
// one key, each waiting its turn: the contended hand-off.
void run_counted_cycles(const std::string& client, const Target& target, long long count, int threads);

}  // namespace bench
