// Tokens of the condition language (see docs/conditions.md for the grammar).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace q4m::cond {

enum class Tok : uint8_t {
  kEnd,
  kIdent,         // column name, unquoted or `backquoted` (text = the name)
  kInt,           // integer literal (ival)
  kDecimal,       // literal with a fraction or exponent (dval)
  kString,        // string literal (text = unescaped bytes)
  kLParen, kRParen, kComma,
  kPlus, kMinus, kStar, kSlash, kPercent, kCaret, kTilde, kBang, kAmp, kPipe, kShl, kShr,
  kEq, kNullSafeEq, kNe /* != <> */, kLt, kLe, kGt, kGe,
  // Keywords (case-insensitive; backquote a column that has one of these names).
  // The lexer folds synonyms: && -> kAnd, || -> kOr, MOD -> kPercent.
  kAnd, kOr, kXor, kNot, kIs, kNull, kTrue, kFalse, kUnknown, kBetween, kIn, kDiv,
};

struct Token {
  Tok kind = Tok::kEnd;
  size_t pos = 0;         // byte offset of the first character
  std::string_view raw;   // spelling in the source (valid while the source is)
  std::string text;       // identifier name or unescaped string value
  uint64_t ival = 0;
  double dval = 0;
};

// How a token is shown in "unexpected ..." messages.
std::string describe(const Token& t);

}  // namespace q4m::cond
