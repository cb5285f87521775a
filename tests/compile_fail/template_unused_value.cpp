// Must not compile: the key template has no field for the value, so every
// order would lock the same key "order".
#include <dlock/dlock.hpp>

void pay(int order) {
  WITH_DISTRIBUTED_LOCK("order", order) {}
}
