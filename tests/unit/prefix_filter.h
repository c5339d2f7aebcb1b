// A RowFilter for storage tests: matches payloads starting with a prefix and counts its
// own evaluations (so tests can assert how many rows a wait looked at).
#pragma once
#include <atomic>
#include <string>
#include <string_view>

#include "core/row/filter.h"

namespace q4m_test {

struct PrefixFilter : q4m::RowFilter {
  explicit PrefixFilter(std::string p) : prefix(std::move(p)) {}
  bool matches(std::string_view payload) const override {
    evals++;
    return payload.substr(0, prefix.size()) == prefix;
  }
  std::string prefix;
  mutable std::atomic<uint64_t> evals{0};
};

}  // namespace q4m_test
