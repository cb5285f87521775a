// Must not compile: with DLOCK_NO_DEFAULT_SERVICE, a free function must name
// its service; it does not fall back to the process default.
// Fix: DISTRIBUTED_LOCK_SERVICE(service);
#define DLOCK_NO_DEFAULT_SERVICE
#include <dlock/dlock.hpp>

void restock() {
  WITH_DISTRIBUTED_LOCK("stock") {}
}
