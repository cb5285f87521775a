// Re-entry across injected services: OrderService holds order:<id> and calls
// InventoryService, which takes the same key again on the same thread. The
// hold count goes 1, 2, 1, 0, and a second service instance cannot take the
// key until the outermost release.
//
//   nested_reentrant --config config/dlock.yaml

#include <iostream>

#include "dlock/dlock.hpp"
#include "example_errors.hpp"
#include "example_flags.hpp"

namespace {

const char* const kUsage =
    "usage: nested_reentrant [--config FILE] [--order ID]\n"
    "  --config FILE   dlock YAML config (default config/dlock.yaml)\n"
    "  --order ID      order id to lock (default 1001)\n";

void step(const std::string& what, int hold_count) {
  std::cout << what << ": hold_count=" << hold_count << std::endl;
}

class InventoryService : public dlock::LockAware {
 public:
  using LockAware::LockAware;

  void reserve_items(const std::string& order_id) {
    WITH_DISTRIBUTED_LOCK("order:" + order_id) {
      step("inventory reserves items (re-entered)", lock_service().hold_count("order:" + order_id));
    }
  }
};

class OrderService : public dlock::LockAware {
 public:
  OrderService(std::shared_ptr<dlock::RedisLockService> locks, InventoryService& inventory,
               std::shared_ptr<dlock::RedisLockService> other_instance)
      : LockAware(std::move(locks)), inventory_(inventory), other_instance_(std::move(other_instance)) {}

  void place(const std::string& order_id) {
    const std::string key = "order:" + order_id;
    WITH_DISTRIBUTED_LOCK(key) {
      step("order service locks " + key, lock_service().hold_count(key));
      inventory_.reserve_items(order_id);
      step("back in order service after the inner release", lock_service().hold_count(key));
      bool taken = static_cast<bool>(other_instance_->try_lock(key));
      std::cout << "second service instance try_lock during the outer hold: " << (taken ? "ACQUIRED" : "refused")
                << std::endl;
      if (taken) throw std::runtime_error("a second instance took a held lock");
    }
    step("after the outermost release", lock_service().hold_count(key));
 // The block's exit sent the release without waiting for its reply: another instance's try sent now may
    // reach Redis first, so it waits up to a second for the release to run (unlock() would have waited for it).
    bool taken = static_cast<bool>(other_instance_->try_lock(key, {.wait = std::chrono::seconds(1)}));
    std::cout << "second service instance try_lock after the release: " << (taken ? "acquired" : "REFUSED")
              << std::endl;
    if (!taken) throw std::runtime_error("the lock was not freed by the outermost release");
  }

 private:
  InventoryService& inventory_;
  std::shared_ptr<dlock::RedisLockService> other_instance_;
};

}  // namespace

int main(int argc, char** argv) {
  example::Flags flags(argc, argv, {"--config", "--order"}, {}, kUsage);
  return example::run_reporting_errors([&] {
    const dlock::Config config = dlock::load_config(flags.text("--config", "config/dlock.yaml"));
    auto locks = dlock::make_lock_service(config);
    auto other_instance = dlock::make_lock_service(config);  // as another process would be
    InventoryService inventory(locks);
    OrderService orders(locks, inventory, other_instance);
    orders.place(flags.text("--order", "1001"));
    return 0;
  });
}
