#include "cond/evaluator.h"

#include <cmath>

#include "cond/column_decode.h"

namespace q4m::cond {
namespace {

constexpr IntValue kNullInt{0, true};
constexpr RealValue kNullReal{0, true};

IntValue checked(Int v) {
  if (v < kIntMin || v > kIntMax) return kNullInt;  // out of BIGINT [UNSIGNED] range
  return IntValue{v, false};
}

// Bit operators work on the 64-bit two's complement pattern, as in MySQL.
uint64_t bits(Int v) { return static_cast<uint64_t>(v); }

Truth of(bool b) { return b ? Truth::kTrue : Truth::kFalse; }

template <typename T>
int order(const T& x, const T& y) { return x < y ? -1 : (y < x ? 1 : 0); }

Truth apply(Cmp cmp, int ord) {
  switch (cmp) {
    case Cmp::kEq: case Cmp::kNullSafeEq: return of(ord == 0);
    case Cmp::kNe: return of(ord != 0);
    case Cmp::kLt: return of(ord < 0);
    case Cmp::kLe: return of(ord <= 0);
    case Cmp::kGt: return of(ord > 0);
    case Cmp::kGe: return of(ord >= 0);
  }
  return Truth::kNull;
}

// NULL handling shared by all comparison types. Returns true if `*out` is decided.
bool null_compare(Cmp cmp, bool x_null, bool y_null, Truth* out) {
  if (!x_null && !y_null) return false;
  *out = cmp == Cmp::kNullSafeEq ? of(x_null && y_null) : Truth::kNull;
  return true;
}

}  // namespace

bool load_cells(const Program& prog, std::string_view payload, Cell* cells) {
  if (payload.size() < prog.null_bytes) return false;
  const unsigned char* base = reinterpret_cast<const unsigned char*>(payload.data());
  const size_t end = payload.size();
  size_t pos = prog.null_bytes;
  for (const WalkStep& step : prog.walk) {
    if (step.null_mask && (base[step.null_byte] & step.null_mask)) {
      if (step.referenced) cells[step.cell] = Cell();
      continue;
    }
    uint64_t len = 0;
    for (int shift = 0;; shift += 7) {
      if (pos >= end || shift > 56) return false;
      unsigned char b = base[pos++];
      len |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (len > end - pos) return false;
    if (step.referenced) {
      if (len < step.min_len || len > step.max_len) return false;
      cells[step.cell] = Cell{base + pos, static_cast<uint32_t>(len), false};
    }
    pos += len;
  }
  return true;
}

Truth Evaluator::truth(uint32_t i) const {
  const Node& n = nodes_[i];
  switch (n.op) {
    case Op::kNot: {
      Truth t = truth(n.a);
      return t == Truth::kNull ? t : of(t == Truth::kFalse);
    }
    case Op::kXor: {
      Truth x = truth(n.a);
      if (x == Truth::kNull) return x;
      Truth y = truth(n.b);
      if (y == Truth::kNull) return y;
      return of(x != y);
    }
    case Op::kAnd: {
      bool unknown = false;
      for (uint32_t k = 0; k < n.count; k++) {
        Truth t = truth(prog_.args[n.first + k]);
        if (t == Truth::kFalse) return t;
        unknown |= t == Truth::kNull;
      }
      return unknown ? Truth::kNull : Truth::kTrue;
    }
    case Op::kOr: {
      bool unknown = false;
      for (uint32_t k = 0; k < n.count; k++) {
        Truth t = truth(prog_.args[n.first + k]);
        if (t == Truth::kTrue) return t;
        unknown |= t == Truth::kNull;
      }
      return unknown ? Truth::kNull : Truth::kFalse;
    }
    case Op::kIsNull: return of(is_null(n.a));
    case Op::kIsTrue: return of(truth(n.a) == Truth::kTrue);
    case Op::kIsFalse: return of(truth(n.a) == Truth::kFalse);
    case Op::kCmpInt: case Op::kCmpReal: case Op::kCmpString: return compare(n);
    case Op::kInInt: case Op::kInReal: case Op::kInString: return in_list(n);
    default:
      break;
  }
  // A number used as a truth value: non-zero is true.
  if (n.type == Type::kDouble) {
    RealValue r = real(i);
    return r.null ? Truth::kNull : of(r.v != 0);
  }
  IntValue v = integer(i);
  return v.null ? Truth::kNull : of(v.v != 0);
}

bool Evaluator::is_null(uint32_t i) const {
  switch (nodes_[i].type) {
    case Type::kInt: return integer(i).null;
    case Type::kDouble: return real(i).null;
    case Type::kString: return string(i).null;
  }
  return true;
}

IntValue Evaluator::integer(uint32_t i) const {
  const Node& n = nodes_[i];
  switch (n.op) {
    case Op::kConstInt: return IntValue{n.ival, false};
    case Op::kConstNull: return kNullInt;
    case Op::kColInt: case Op::kColYear: case Op::kColDate: case Op::kColDatetime:
    case Op::kColTimestamp: case Op::kColTime: {
      const Cell& c = cells_[n.a];
      if (c.null) return kNullInt;
      switch (n.op) {
        case Op::kColInt: return IntValue{decode::integer(c.p, c.len, n.is_unsigned), false};
        case Op::kColYear: return IntValue{decode::year(c.p), false};
        case Op::kColDate: return IntValue{decode::date(c.p), false};
        case Op::kColDatetime: return IntValue{decode::datetime(c.p), false};
        case Op::kColTimestamp: return IntValue{decode::timestamp(c.p), false};
        default: return IntValue{decode::time(c.p, c.len), false};
      }
    }
    case Op::kNeg: case Op::kBitNot: case Op::kAdd: case Op::kSub: case Op::kMul: case Op::kIntDiv:
    case Op::kMod: case Op::kBitAnd: case Op::kBitOr: case Op::kBitXor: case Op::kShl: case Op::kShr:
      return arithmetic(n);
    case Op::kIntDivReal: {
      RealValue x = real(n.a);
      if (x.null) return kNullInt;
      RealValue y = real(n.b);
      if (y.null || y.v == 0) return kNullInt;
      double q = std::trunc(x.v / y.v);
      // Range test written so that NaN fails it too.
      if (!(q >= -9223372036854775808.0 && q < 18446744073709551616.0)) return kNullInt;
      return IntValue{static_cast<Int>(q), false};
    }
    default: {
      // Truth-valued operators are integers 1 / 0 / NULL.
      Truth t = truth(i);
      return t == Truth::kNull ? kNullInt : IntValue{t == Truth::kTrue ? 1 : 0, false};
    }
  }
}

IntValue Evaluator::arithmetic(const Node& n) const {
  IntValue x = integer(n.a);
  if (x.null) return kNullInt;
  if (n.op == Op::kNeg) return checked(-x.v);
  if (n.op == Op::kBitNot) return IntValue{static_cast<Int>(~bits(x.v)), false};
  IntValue y = integer(n.b);
  if (y.null) return kNullInt;
  switch (n.op) {
    case Op::kAdd: return checked(x.v + y.v);  // both in range: cannot overflow 128 bits
    case Op::kSub: return checked(x.v - y.v);
    case Op::kMul: {
      Int r;
      if (__builtin_mul_overflow(x.v, y.v, &r)) return kNullInt;
      return checked(r);
    }
    case Op::kIntDiv: return y.v == 0 ? kNullInt : checked(x.v / y.v);
    case Op::kMod: return y.v == 0 ? kNullInt : IntValue{x.v % y.v, false};
    case Op::kBitAnd: return IntValue{static_cast<Int>(bits(x.v) & bits(y.v)), false};
    case Op::kBitOr: return IntValue{static_cast<Int>(bits(x.v) | bits(y.v)), false};
    case Op::kBitXor: return IntValue{static_cast<Int>(bits(x.v) ^ bits(y.v)), false};
    case Op::kShl: return IntValue{bits(y.v) >= 64 ? 0 : static_cast<Int>(bits(x.v) << bits(y.v)), false};
    case Op::kShr: return IntValue{bits(y.v) >= 64 ? 0 : static_cast<Int>(bits(x.v) >> bits(y.v)), false};
    default: return kNullInt;
  }
}

RealValue Evaluator::real(uint32_t i) const {
  const Node& n = nodes_[i];
  switch (n.op) {
    case Op::kConstDouble: return RealValue{n.dval, false};
    case Op::kColFloat: case Op::kColDouble: {
      const Cell& c = cells_[n.a];
      if (c.null) return kNullReal;
      return RealValue{n.op == Op::kColFloat ? decode::float32(c.p) : decode::float64(c.p), false};
    }
    case Op::kToReal: {
      IntValue v = integer(n.a);
      return v.null ? kNullReal : RealValue{static_cast<double>(v.v), false};
    }
    case Op::kNegReal: case Op::kAddReal: case Op::kSubReal: case Op::kMulReal: case Op::kDivReal:
    case Op::kModReal:
      return real_arithmetic(n);
    default:
      return kNullReal;  // kConstNull
  }
}

RealValue Evaluator::real_arithmetic(const Node& n) const {
  RealValue x = real(n.a);
  if (x.null) return kNullReal;
  if (n.op == Op::kNegReal) return RealValue{-x.v, false};
  RealValue y = real(n.b);
  if (y.null) return kNullReal;
  switch (n.op) {
    case Op::kAddReal: return RealValue{x.v + y.v, false};
    case Op::kSubReal: return RealValue{x.v - y.v, false};
    case Op::kMulReal: return RealValue{x.v * y.v, false};
    case Op::kDivReal: return y.v == 0 ? kNullReal : RealValue{x.v / y.v, false};
    case Op::kModReal: return y.v == 0 ? kNullReal : RealValue{std::fmod(x.v, y.v), false};
    default: return kNullReal;
  }
}

StrValue Evaluator::string(uint32_t i) const {
  const Node& n = nodes_[i];
  switch (n.op) {
    case Op::kConstString: return StrValue{prog_.strings[n.a], false};
    case Op::kColString: case Op::kColChar: {
      const Cell& c = cells_[n.a];
      if (c.null) return StrValue{{}, true};
      if (n.op == Op::kColChar) return StrValue{decode::char_value(c.p, c.len), false};
      return StrValue{std::string_view(reinterpret_cast<const char*>(c.p), c.len), false};
    }
    default:
      return StrValue{{}, true};  // kConstNull
  }
}

int Evaluator::compare_strings(const Node& n, std::string_view x, std::string_view y) const {
  if (n.collation) return prog_.collations[n.collation - 1](x, y);
  return x.compare(y);  // byte-wise, as unsigned char
}

Truth Evaluator::compare(const Node& n) const {
  // Without <=>, a NULL left side decides the result before the right is evaluated.
  Truth decided;
  switch (n.op) {
    case Op::kCmpInt: {
      IntValue x = integer(n.a);
      if (x.null && n.cmp != Cmp::kNullSafeEq) return Truth::kNull;
      IntValue y = integer(n.b);
      if (null_compare(n.cmp, x.null, y.null, &decided)) return decided;
      return apply(n.cmp, order(x.v, y.v));
    }
    case Op::kCmpReal: {
      RealValue x = real(n.a);
      if (x.null && n.cmp != Cmp::kNullSafeEq) return Truth::kNull;
      RealValue y = real(n.b);
      if (null_compare(n.cmp, x.null, y.null, &decided)) return decided;
      if (std::isnan(x.v) || std::isnan(y.v)) return Truth::kNull;
      return apply(n.cmp, order(x.v, y.v));
    }
    default: {
      StrValue x = string(n.a);
      if (x.null && n.cmp != Cmp::kNullSafeEq) return Truth::kNull;
      StrValue y = string(n.b);
      if (null_compare(n.cmp, x.null, y.null, &decided)) return decided;
      const int c = compare_strings(n, x.v, y.v);
      return apply(n.cmp, c < 0 ? -1 : (c > 0 ? 1 : 0));
    }
  }
}

// x IN (a, b, ...) is x = a OR x = b OR ...: TRUE on a match, else NULL if x or
// any list item is NULL, else FALSE.
Truth Evaluator::in_list(const Node& n) const {
  const uint32_t* items = prog_.args.data() + n.first;
  bool unknown = false;
  switch (n.op) {
    case Op::kInInt: {
      IntValue x = integer(n.a);
      if (x.null) return Truth::kNull;
      for (uint32_t k = 0; k < n.count; k++) {
        IntValue y = integer(items[k]);
        if (y.null) unknown = true;
        else if (y.v == x.v) return Truth::kTrue;
      }
      break;
    }
    case Op::kInReal: {
      RealValue x = real(n.a);
      if (x.null) return Truth::kNull;
      for (uint32_t k = 0; k < n.count; k++) {
        RealValue y = real(items[k]);
        if (y.null) unknown = true;
        else if (y.v == x.v) return Truth::kTrue;
      }
      break;
    }
    default: {
      StrValue x = string(n.a);
      if (x.null) return Truth::kNull;
      for (uint32_t k = 0; k < n.count; k++) {
        StrValue y = string(items[k]);
        if (y.null) unknown = true;
        else if (compare_strings(n, x.v, y.v) == 0) return Truth::kTrue;
      }
      break;
    }
  }
  return unknown ? Truth::kNull : Truth::kFalse;
}

}  // namespace q4m::cond
