// Syntax tree of a parsed condition: untyped, with source positions for errors.
// The compiler (compiler.h) types it against a table schema.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cond/token.h"

namespace q4m::cond {

struct Ast {
  enum class Kind : uint8_t {
    kInt,        // ival (TRUE/FALSE are 1/0)
    kDecimal,    // dval
    kString,     // text
    kNull,
    kColumn,     // text = name as written
    kUnary,      // op in {kMinus, kPlus, kTilde, kBang, kNot}; kids[0]
    kBinary,     // op = arithmetic/bit/comparison operator or kXor; kids[0], kids[1]
    kLogical,    // op in {kAnd, kOr}; kids = 2 or more operands (chains are kept flat)
    kIsTest,     // kids[0] IS [NOT] op, op in {kNull, kTrue, kFalse, kUnknown}
    kBetween,    // kids[0] [NOT] BETWEEN kids[1] AND kids[2]
    kIn,         // kids[0] [NOT] IN (kids[1..])
  };
  Kind kind;
  Tok op = Tok::kEnd;
  bool negated = false;   // IS NOT / NOT BETWEEN / NOT IN
  size_t pos = 0;         // byte offset of the operator or operand token
  int depth = 1;          // 1 + deepest child; bounded by the parser
  uint64_t ival = 0;
  double dval = 0;
  std::string text;
  std::vector<std::unique_ptr<Ast>> kids;

  Ast(Kind k, size_t p) : kind(k), pos(p) {}
};

}  // namespace q4m::cond
