// Must not compile: the key template has two fields and one value.
#include <dlock/dlock.hpp>

void pay(int order) {
  WITH_DISTRIBUTED_LOCK("order:{}:{}", order) {}
}
