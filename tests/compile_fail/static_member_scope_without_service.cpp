// Must not compile: DISTRIBUTED_LOCK_SCOPE in a static member function of a
// LockAware class has no injected service, as the block forms have none.
// Fix: DISTRIBUTED_LOCK_SERVICE(some_object.lock_service());
#include <dlock/dlock.hpp>

class Inventory : public dlock::LockAware {
 public:
  using LockAware::LockAware;
  static void restock() { DISTRIBUTED_LOCK_SCOPE("stock:{}", 7); }
};
