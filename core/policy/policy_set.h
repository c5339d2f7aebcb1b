// PolicySet: a list of policies fixed at compile time, and the calls to all of them in list
// order (a fold over a tuple: every call is direct and inlinable, none virtual).
#pragma once
#include <cstddef>
#include <tuple>
#include <utility>

namespace q4m {

template <typename... P>
class PolicySet {
 public:
  // f(policy) for each policy, in list order.
  template <typename F>
  void each(F&& f) {
    std::apply([&](auto&... p) { (f(p), ...); }, all_);
  }
  template <typename F>
  void each(F&& f) const {
    std::apply([&](const auto&... p) { (f(p), ...); }, all_);
  }
  // Whether every policy's pred(policy) holds (stops at the first that does not).
  template <typename F>
  bool all(F&& pred) const {
    return std::apply([&](const auto&... p) { return (pred(p) && ...); }, all_);
  }
  template <typename F>
  bool any(F&& pred) const {
    return std::apply([&](const auto&... p) { return (pred(p) || ...); }, all_);
  }
  // f(policy, theirs) for each policy and the same policy of `other` (another table's set),
  // in list order.
  template <typename F>
  void each_with(const PolicySet& other, F&& f) {
    each_with_at(other, f, std::index_sequence_for<P...>{});
  }
  // pred(policy) in list order until one says false; then undo(policy) for the ones before
  // it, latest first. False if one refused.
  template <typename F, typename U>
  bool until_refused(F&& pred, U&& undo) {
    return step<0>(pred, undo);
  }

  template <typename T>
  T& get() {
    return std::get<T>(all_);
  }
  template <typename T>
  const T& get() const {
    return std::get<T>(all_);
  }

 private:
  template <typename F, size_t... I>
  void each_with_at(const PolicySet& other, F& f, std::index_sequence<I...>) {
    (f(std::get<I>(all_), std::get<I>(other.all_)), ...);
  }
  template <size_t I, typename F, typename U>
  bool step(F& pred, U& undo) {
    if constexpr (I == sizeof...(P)) {
      return true;
    } else {
      if (!pred(std::get<I>(all_))) return false;
      if (step<I + 1>(pred, undo)) return true;
      undo(std::get<I>(all_));
      return false;
    }
  }
  std::tuple<P...> all_;
};

}  // namespace q4m
