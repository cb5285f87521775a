#pragma once
// Redis Cluster's hash slots: which of the 16384 slots a key belongs to (CRC16
// of the key, or of its {hash tag}), and which key of a command decides where
// the command goes.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace dlock::detail {

inline constexpr std::uint32_t kSlotCount = 16384;

// The slot of `key`: CRC16 (XMODEM) of the text between the first '{' and the
// next '}' when that is not empty, else of the whole key, modulo 16384.
std::uint16_t key_slot(std::string_view key);

// How a command is routed in a cluster.
enum class CommandKind {
  keyed,      // by the slot of its key (argv[1]; an EVAL's first key)
  keyless,    // to any master (PING, TIME, INFO, ROLE, WAIT, ...)
  every_master,  // to each master in turn (SCRIPT LOAD, SCRIPT FLUSH)
};

struct CommandRoute {
  CommandKind kind = CommandKind::keyless;
  std::uint16_t slot = 0;  // when keyed
};

// The route of `argv` (its parts as views). An EVAL/EVALSHA without keys, or
// a command too short to name a key, is keyless.
CommandRoute route_of(std::span<const std::string_view> argv);

}  // namespace dlock::detail
