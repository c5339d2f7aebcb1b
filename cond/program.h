// The compiled form of a condition: a flat, statically typed expression tree
// (nodes refer to children by index) plus the recipe for pulling the referenced
// columns out of a row payload in one pass. Immutable after compilation, so one
// Program can be evaluated by any number of threads at once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace q4m::cond {

// Integer values are held in 128 bits so that every mix of signed and unsigned
// 64-bit operands computes exactly; a result outside [-2^63, 2^64-1] is NULL.
using Int = __int128;
constexpr Int kIntMin = -(static_cast<Int>(1) << 63);
constexpr Int kIntMax = (static_cast<Int>(1) << 64) - 1;

// Static type of a node's value. Truth values are kInt (1, 0 or NULL).
enum class Type : uint8_t { kInt, kDouble, kString };

enum class Op : uint8_t {
  // Leaves. Column leaves read Program::Cell `a`.
  kConstInt, kConstDouble, kConstString /* strings[a] */, kConstNull,
  kColInt /* is_unsigned */, kColYear, kColDate, kColDatetime, kColTimestamp, kColTime,
  kColFloat, kColDouble, kColString, kColChar /* trailing spaces dropped */,
  // Integer arithmetic on children a (, b).
  kNeg, kBitNot, kAdd, kSub, kMul, kIntDiv, kMod, kBitAnd, kBitOr, kBitXor, kShl, kShr,
  kIntDivReal,  // `x DIV y` with a floating operand: truncated floating quotient
  // Floating arithmetic.
  kToReal, kNegReal, kAddReal, kSubReal, kMulReal, kDivReal, kModReal,
  // Truth values.
  kNot, kXor, kIsNull, kIsTrue, kIsFalse,
  kAnd, kOr,                              // args[first .. first+count)
  kCmpInt, kCmpReal, kCmpString,          // a <cmp> b
  kInInt, kInReal, kInString,             // a IN (args[first .. first+count))
};

enum class Cmp : uint8_t { kEq, kNullSafeEq, kNe, kLt, kLe, kGt, kGe };

struct Node {
  Op op = Op::kConstNull;
  Type type = Type::kInt;
  Cmp cmp = Cmp::kEq;
  bool is_unsigned = false;   // kColInt
  uint32_t a = 0, b = 0;      // children; for column leaves `a` is the cell index
  uint32_t first = 0, count = 0;
  uint32_t collation = 0;     // kCmpString, kInString: 0 = bytes, k = Program::collations[k - 1]
  Int ival = 0;
  double dval = 0;
};

// One column of the payload walk (program.walk covers columns 0..last referenced).
struct WalkStep {
  uint32_t null_byte = 0;
  uint8_t null_mask = 0;      // 0 = the column is never NULL
  bool referenced = false;    // keep its bytes in cells[cell]
  uint32_t cell = 0;
  uint32_t min_len = 0, max_len = UINT32_MAX;  // byte lengths the decoder accepts
};

struct Program {
  std::vector<Node> nodes;
  std::vector<uint32_t> args;        // child lists of kAnd/kOr/kIn*
  std::vector<std::string> strings;  // string constants
  uint32_t root = 0;
  uint32_t null_bytes = 0;
  std::vector<WalkStep> walk;
  uint32_t cell_count = 0;           // distinct columns referenced
  // String comparisons under a column's collation (ColumnInfo::collate_compare).
  std::vector<std::function<int(std::string_view, std::string_view)>> collations;
};

}  // namespace q4m::cond
