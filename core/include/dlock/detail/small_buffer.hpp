#pragma once
// A fixed number of elements, kept on the stack when there are at most N of
// them: the per-call argument arrays of lock() and unlock() are that small,
// and a heap allocation for each would show in their cost.

#include <array>
#include <cstddef>
#include <span>
#include <vector>

namespace dlock::detail {

template <typename T, std::size_t N>
class SmallBuffer {
 public:
  explicit SmallBuffer(std::size_t size) : size_(size) {
    if (size > N) heap_.resize(size);
  }
  SmallBuffer(const SmallBuffer&) = delete;  // the span would point into the original
  SmallBuffer& operator=(const SmallBuffer&) = delete;

  std::span<T> span() { return {size_ > N ? heap_.data() : inline_.data(), size_}; }

 private:
  std::array<T, N> inline_{};
  std::vector<T> heap_;
  std::size_t size_;
};

}  // namespace dlock::detail
