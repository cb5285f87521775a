#pragma once
// Keys may be binary: messages and logs show them escaped and bounded.

#include <string>
#include <string_view>

namespace dlock::detail {

// Printable bytes as they are, others (and '\') as \xNN; at most 200 bytes shown.
std::string printable(std::string_view key);

// "lock 'KEY'", with KEY printable.
std::string lock_label(std::string_view key);
// "NOUN 'KEY'" ("semaphore 'payments'"), with KEY printable.
std::string labelled(std::string_view noun, std::string_view key);

}  // namespace dlock::detail
