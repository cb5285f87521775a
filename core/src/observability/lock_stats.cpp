// format_stats: a LockStats as one line of name=value pairs for a log, latencies in microseconds.
#include "dlock/lock_stats.hpp"

#include <sstream>

namespace dlock {

std::string format_stats(const LockStats& stats) {
  std::ostringstream out;
  out << "acquired=" << stats.acquired << " reentered=" << stats.reentered << " released=" << stats.released
      << " contended=" << stats.contended << " busy=" << stats.busy << " timeouts=" << stats.timeouts
      << " lost=" << stats.lost << " renewals_sent=" << stats.renewals_sent
      << " renewals_failed=" << stats.renewals_failed << " renewal_rounds=" << stats.renewal_rounds
      << " handed_over=" << stats.handed_over << " releases_failed=" << stats.releases_failed << " acquire_p50=" << stats.acquire_p50.count()
      << "us acquire_p99=" << stats.acquire_p99.count() << "us acquire_max=" << stats.acquire_max.count()
      << "us held=" << stats.held << " waiting=" << stats.waiting;
  return out.str();
}

}  // namespace dlock
