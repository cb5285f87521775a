// A service outside the dlock tree, built against an installed dlock (with
// find_package, with pkg-config, and with add_subdirectory): its own YAML
// file holds its settings and, in a `dlock:` section, dlock's; a stock count
// is guarded by a DistributedMutex under std::scoped_lock.
//
//   consumer CONFIG     CONFIG as written by test_packaging, pointing at a throwaway Redis
#include <iostream>
#include <mutex>

#include <dlock/dlock.hpp>
#include <dlock/version.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer CONFIG\n";
    return 2;
  }
  try {
    const dlock::Config config = dlock::load_config(argv[1], "dlock");  // the rest of the file is the service's
    auto service = dlock::make_lock_service(config);
    dlock::DistributedMutex stock(service, "stock:42");
    {
      std::scoped_lock hold(stock);
      std::cout << "scoped_lock held=" << stock.hold_count() << " token=" << (stock.fencing_token() > 0 ? "yes" : "no")
                << "\n";
    }
    std::cout << "after scope held=" << stock.hold_count() << "\n";
    try {
      dlock::load_config("/nonexistent/dlock-consumer.yaml");
    } catch (const dlock::ConfigError&) {
      std::cout << "config_error=caught\n";
    }
    std::cout << "dlock_version=" << dlock::version() << " prefix=" << config.lock.key_prefix << "\n";
    return 0;
  } catch (const dlock::Error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
