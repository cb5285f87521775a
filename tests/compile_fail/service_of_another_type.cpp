// Must not compile: DISTRIBUTED_LOCK_SERVICE takes a RedisLockService, not
// whatever else is at hand (here the LockAware object itself).
#include <dlock/dlock.hpp>

class Inventory : public dlock::LockAware {
 public:
  using LockAware::LockAware;
  static void restock(Inventory& inventory) {
    DISTRIBUTED_LOCK_SERVICE(inventory);
    WITH_DISTRIBUTED_LOCK("stock") {}
  }
};
