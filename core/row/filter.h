// A predicate over a stored row's payload (the bytes the engine gave to insert()).
// Conditional subscriptions (cond/) implement it; a null filter means "any row".
// Implementations must be thread-safe: the writer thread evaluates a waiter's filter
// when handing a new row to it.
#pragma once
#include <string_view>

namespace q4m {

class RowFilter {
 public:
  virtual ~RowFilter() = default;
  virtual bool matches(std::string_view payload) const = 0;
};

}  // namespace q4m
