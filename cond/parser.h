// Recursive-descent / precedence-climbing parser for conditions, with MySQL's
// operator precedence (docs/conditions.md). Nesting is bounded so that neither
// parsing, compiling nor evaluating can exhaust a server thread's stack.
#pragma once
#include <memory>
#include <string_view>

#include "cond/ast.h"
#include "cond/cond_error.h"

namespace q4m::cond {

// Deepest nesting accepted: each parenthesis, prefix operator and right-nested
// operand (BETWEEN's upper bound, a comparison's right side) is one level.
constexpr int kMaxNesting = 32;
// Deepest syntax tree accepted (AND/OR chains count as one level).
constexpr int kMaxAstDepth = 64;

// Returns the tree, or nullptr with `err` filled.
std::unique_ptr<Ast> parse(std::string_view src, CondError* err);

}  // namespace q4m::cond
