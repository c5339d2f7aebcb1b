// An error found while compiling a condition: where (byte offset into the
// expression) and what. condition.cc turns it into the user-facing Status text.
#pragma once
#include <cstddef>
#include <string>

namespace q4m::cond {

struct CondError {
  size_t offset = 0;      // byte offset into the expression (may equal its length = "at the end")
  std::string what;       // e.g. "unknown column 'prio'"
  bool syntax = false;    // true: reported as "syntax error at position P: <what>"
};

}  // namespace q4m::cond
