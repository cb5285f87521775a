// Must not compile: the key template has one field and two values (options
// last do not count as a value); fmt's parser is not reached.
#include <chrono>

#include <dlock/dlock.hpp>

void deduct(int sku, int quantity) {
  using namespace std::chrono_literals;
  WITH_DISTRIBUTED_LOCK("stock:{}", sku, quantity, {.wait = 500ms}) {}
}
