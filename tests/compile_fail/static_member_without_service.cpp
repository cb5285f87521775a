// Must not compile: a static member function of a LockAware class has no
// injected service to use, and must not fall back to the default one.
// Fix: DISTRIBUTED_LOCK_SERVICE(some_object.lock_service());
#include <dlock/dlock.hpp>

class Inventory : public dlock::LockAware {
 public:
  using LockAware::LockAware;
  static void restock() {
    WITH_DISTRIBUTED_LOCK("stock") {}
  }
};
