#pragma once
// What every ```cpp block of the docs is compiled after (tests/docs/extract_snippets.py):
// the library's front door, std::chrono's literals (the docs write 2s, 500ms),
// and stand-ins for the reader's own code that the snippets call, so a snippet
// shows only dlock's part. A snippet that calls a function of the reader's
// that is not here adds it here, with the parameters the snippet passes.
// They are defined (trivially), so a snippet with a main() could be linked.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <dlock/dlock.hpp>

using namespace std::chrono_literals;

// The things a service works on.
struct Order {
  std::vector<std::string> skus;
};
inline const Order order;
inline const std::string sku = "42";
inline const std::string name = "daily";
inline const std::string region = "eu";
inline const long long id = 42;
inline const long long user_id = 7;
inline const long long order_id = 42;

// The store a lock protects: it takes the fencing token and refuses older ones.
inline long long read_stock(const std::string&) { return 0; }
inline void write_stock(const std::string&, long long, std::uint64_t) {}
inline void write_stock(std::uint64_t) {}
inline void deduct(const std::string&) {}
inline void deduct_all(const Order&) {}
inline void pay(const Order&, std::uint64_t) {}
inline void pay(std::uint64_t) {}
inline void ship(const Order&) {}

// Work done under a lock, or instead of it.
inline void run() {}
inline void run_report() {}
inline void skipped() {}
inline void quote() {}
inline void reprice() {}
inline void call_provider() {}
