// Must not compile: a lambda inside a LockAware member that does not capture
// `this` cannot reach the injected service, and must not fall back to the
// default one. Fix: capture `this`, or DISTRIBUTED_LOCK_SERVICE(...) inside.
#include <dlock/dlock.hpp>

class Inventory : public dlock::LockAware {
 public:
  using LockAware::LockAware;
  void restock() {
    auto work = [] {
      WITH_DISTRIBUTED_LOCK("stock") {}
    };
    work();
  }
};
