#pragma once
// The arguments of a block or scope form, in the order a user writes them:
//   (key)  (key, options)  (template, values...)  (template, values..., options)
// turned into one key and its options. One argument is a key as it is; with
// more, the first is a template (lock_key.hpp), unless the last is options:
// a braced {.wait = 500ms, .lease = 10s}, or a LockOptions or BlockOptions value.

#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "dlock/lock_key.hpp"
#include "dlock/lock_options.hpp"

namespace dlock::detail {

struct BlockRequest {
  std::string key;
  BlockOptions options;
};

template <typename T>
inline constexpr bool is_options_v =
    std::is_same_v<std::remove_cvref_t<T>, LockOptions> || std::is_same_v<std::remove_cvref_t<T>, BlockOptions>;

template <typename... Args>
inline constexpr bool ends_in_options_v = is_options_v<std::tuple_element_t<sizeof...(Args) - 1, std::tuple<Args...>>>;

// A key as it is, with or without options.
inline BlockRequest block_request(std::string_view key, BlockOptions options = {}) {
  return {std::string(key), options};
}

// A template and its values.
template <typename First, typename... Rest>
  requires(!ends_in_options_v<First, Rest...>)
BlockRequest block_request(key_template<First, Rest...> pattern, First&& first, Rest&&... rest) {
  return {lock_key(pattern, std::forward<First>(first), std::forward<Rest>(rest)...), {}};
}

// A template, its values and options last: one overload per number of values,
// because a parameter pack is deduced only at the end of the parameters and
// a braced {.wait = 500ms} is never deduced at all. Six values are plenty for a key.
template <typename A>
BlockRequest block_request(key_template<A> pattern, A&& a, BlockOptions options) {
  return {lock_key(pattern, std::forward<A>(a)), options};
}
template <typename A, typename B>
BlockRequest block_request(key_template<A, B> pattern, A&& a, B&& b, BlockOptions options) {
  return {lock_key(pattern, std::forward<A>(a), std::forward<B>(b)), options};
}
template <typename A, typename B, typename C>
BlockRequest block_request(key_template<A, B, C> pattern, A&& a, B&& b, C&& c, BlockOptions options) {
  return {lock_key(pattern, std::forward<A>(a), std::forward<B>(b), std::forward<C>(c)), options};
}
template <typename A, typename B, typename C, typename D>
BlockRequest block_request(key_template<A, B, C, D> pattern, A&& a, B&& b, C&& c, D&& d, BlockOptions options) {
  return {lock_key(pattern, std::forward<A>(a), std::forward<B>(b), std::forward<C>(c), std::forward<D>(d)), options};
}
template <typename A, typename B, typename C, typename D, typename E>
BlockRequest block_request(key_template<A, B, C, D, E> pattern, A&& a, B&& b, C&& c, D&& d, E&& e,
                           BlockOptions options) {
  return {lock_key(pattern, std::forward<A>(a), std::forward<B>(b), std::forward<C>(c), std::forward<D>(d),
                   std::forward<E>(e)),
          options};
}
template <typename A, typename B, typename C, typename D, typename E, typename F>
BlockRequest block_request(key_template<A, B, C, D, E, F> pattern, A&& a, B&& b, C&& c, D&& d, E&& e, F&& f,
                           BlockOptions options) {
  return {lock_key(pattern, std::forward<A>(a), std::forward<B>(b), std::forward<C>(c), std::forward<D>(d),
                   std::forward<E>(e), std::forward<F>(f)),
          options};
}

}  // namespace dlock::detail
