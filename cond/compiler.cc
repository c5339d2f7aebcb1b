#include "cond/compiler.h"

#include <string>
#include <utility>
#include <vector>

#include "cond/evaluator.h"
#include "cond/temporal_literal.h"

namespace q4m::cond {
namespace {

// What an operand is at compile time. kNull is the NULL literal (and anything
// computed from it), which takes the type of whatever it meets.
enum class Cls : uint8_t { kNull, kInt, kDouble, kString };
// Which integer encoding a bare temporal column produces; decides how string
// literals compared with it are converted and which comparisons make sense.
enum class Domain : uint8_t { kNumber, kDate, kDatetime, kTime, kTimestamp };

struct Ref {
  uint32_t node = 0;
  Cls cls = Cls::kNull;
  Domain domain = Domain::kNumber;
  const std::string* column = nullptr;  // set for a bare column reference
  const ColumnInfo* info = nullptr;     // the same column's schema entry
};

Type type_of(Cls c) {
  return c == Cls::kDouble ? Type::kDouble : (c == Cls::kString ? Type::kString : Type::kInt);
}

bool is_const(Op op) {
  return op == Op::kConstInt || op == Op::kConstDouble || op == Op::kConstString || op == Op::kConstNull;
}

bool names_equal(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

const char* op_name(Tok t) {
  switch (t) {
    case Tok::kPlus: return "+";
    case Tok::kMinus: return "-";
    case Tok::kStar: return "*";
    case Tok::kSlash: return "/";
    case Tok::kDiv: return "DIV";
    case Tok::kPercent: return "%";
    case Tok::kCaret: return "^";
    case Tok::kTilde: return "~";
    case Tok::kAmp: return "&";
    case Tok::kPipe: return "|";
    case Tok::kShl: return "<<";
    case Tok::kShr: return ">>";
    default: return "operator";
  }
}

const char* domain_name(Domain d) {
  switch (d) {
    case Domain::kDate: return "DATE";
    case Domain::kDatetime: return "DATETIME";
    case Domain::kTime: return "TIME";
    case Domain::kTimestamp: return "TIMESTAMP";
    default: return "number";
  }
}

class Compiler {
 public:
  Compiler(const TableSchema& schema, Program* prog, CondError* err)
      : schema_(schema), prog_(prog), err_(err), cell_of_(schema.columns.size(), -1) {}

  bool run(const Ast& root) {
    Ref r;
    if (!value(root, &r) || !truth_operand(r, root.pos)) return false;
    prog_->root = r.node;
    return plan_walk();
  }

 private:
  bool fail(size_t pos, std::string what) {
    err_->offset = pos;
    err_->what = std::move(what);
    err_->syntax = false;
    return false;
  }

  // Appends a node; a node whose operands are all constants is evaluated now and
  // replaced by its value, so rows never pay for constant arithmetic.
  uint32_t add(Node n) {
    uint32_t idx = static_cast<uint32_t>(prog_->nodes.size());
    prog_->nodes.push_back(n);
    if (!is_const(n.op) && all_children_constant(n)) fold(idx);
    return idx;
  }

  bool all_children_constant(const Node& n) const {
    const auto& nodes = prog_->nodes;
    switch (n.op) {
      case Op::kColInt: case Op::kColYear: case Op::kColDate: case Op::kColDatetime:
      case Op::kColTimestamp: case Op::kColTime: case Op::kColFloat: case Op::kColDouble:
      case Op::kColString: case Op::kColChar:
        return false;
      case Op::kNeg: case Op::kBitNot: case Op::kToReal: case Op::kNegReal: case Op::kNot:
      case Op::kIsNull: case Op::kIsTrue: case Op::kIsFalse:
        return is_const(nodes[n.a].op);
      case Op::kAnd: case Op::kOr: case Op::kInInt: case Op::kInReal: case Op::kInString:
        if ((n.op == Op::kInInt || n.op == Op::kInReal || n.op == Op::kInString) && !is_const(nodes[n.a].op))
          return false;
        for (uint32_t k = 0; k < n.count; k++)
          if (!is_const(nodes[prog_->args[n.first + k]].op)) return false;
        return true;
      default:  // binary operators
        return is_const(nodes[n.a].op) && is_const(nodes[n.b].op);
    }
  }

  void fold(uint32_t idx) {
    Evaluator ev(*prog_, nullptr);
    Node c;
    c.type = prog_->nodes[idx].type;
    if (c.type == Type::kDouble) {
      RealValue v = ev.real(idx);
      c.op = v.null ? Op::kConstNull : Op::kConstDouble;
      c.dval = v.v;
    } else {  // no operator yields a string, so this is an integer or truth value
      IntValue v = ev.integer(idx);
      c.op = v.null ? Op::kConstNull : Op::kConstInt;
      c.ival = v.v;
    }
    prog_->nodes[idx] = c;
  }

  uint32_t leaf(Op op, Type type) {
    Node n;
    n.op = op;
    n.type = type;
    return add(n);
  }
  uint32_t const_int(Int v) {
    Node n;
    n.op = Op::kConstInt;
    n.ival = v;
    return add(n);
  }
  uint32_t node1(Op op, Type type, uint32_t a) {
    Node n;
    n.op = op;
    n.type = type;
    n.a = a;
    return add(n);
  }
  uint32_t node2(Op op, Type type, uint32_t a, uint32_t b, Cmp cmp = Cmp::kEq) {
    Node n;
    n.op = op;
    n.type = type;
    n.a = a;
    n.b = b;
    n.cmp = cmp;
    return add(n);
  }
  uint32_t list(Op op, uint32_t a, const std::vector<uint32_t>& items) {
    Node n;
    n.op = op;
    n.a = a;
    n.first = static_cast<uint32_t>(prog_->args.size());
    n.count = static_cast<uint32_t>(items.size());
    prog_->args.insert(prog_->args.end(), items.begin(), items.end());
    return add(n);
  }

  Ref null_ref() { return Ref{leaf(Op::kConstNull, Type::kInt), Cls::kNull}; }

  // The node for `r` as a value of class `c` (Int -> Double widening, typed NULLs).
  uint32_t as(const Ref& r, Cls c) {
    if (r.cls == Cls::kNull) return leaf(Op::kConstNull, type_of(c));
    if (c == Cls::kDouble && r.cls == Cls::kInt) return node1(Op::kToReal, Type::kDouble, r.node);
    return r.node;
  }

  bool truth_operand(const Ref& r, size_t pos) {
    if (r.cls == Cls::kString)
      return fail(pos, "a string is not a truth value (compare it instead, e.g. col <> '')");
    return true;
  }

  bool value(const Ast& a, Ref* out) {
    switch (a.kind) {
      case Ast::Kind::kInt:
        *out = Ref{const_int(static_cast<Int>(a.ival)), Cls::kInt};
        return true;
      case Ast::Kind::kDecimal: {
        Node n;
        n.op = Op::kConstDouble;
        n.type = Type::kDouble;
        n.dval = a.dval;
        *out = Ref{add(n), Cls::kDouble};
        return true;
      }
      case Ast::Kind::kString: {
        *out = string_constant(a.text);
        return true;
      }
      case Ast::Kind::kNull: *out = null_ref(); return true;
      case Ast::Kind::kColumn: return column(a, out);
      case Ast::Kind::kUnary: return unary(a, out);
      case Ast::Kind::kBinary: return binary(a, out);
      case Ast::Kind::kLogical: return logical(a, out);
      case Ast::Kind::kIsTest: return is_test(a, out);
      case Ast::Kind::kBetween: return between(a, out);
      case Ast::Kind::kIn: return in_list(a, out);
    }
    return fail(a.pos, "unsupported expression");
  }

  bool column(const Ast& a, Ref* out) {
    size_t index = schema_.columns.size();
    for (size_t i = 0; i < schema_.columns.size(); i++)
      if (names_equal(schema_.columns[i].name, a.text)) { index = i; break; }
    if (index == schema_.columns.size()) return fail(a.pos, "unknown column '" + a.text + "'");
    const ColumnInfo& col = schema_.columns[index];
    if (col.compressed)
      return fail(a.pos, "column '" + col.name + "' is COMPRESSED: conditions cannot read its value");
    if (col.row_id)
      return fail(a.pos, "column '" + col.name + "' is the table's ROW_ID_COLUMN: conditions cannot read it (a row's "
                         "id is not in its stored bytes)");
    Node n;
    Cls cls = Cls::kInt;
    Domain domain = Domain::kNumber;
    switch (col.kind) {
      case ColumnKind::kInt: n.op = Op::kColInt; n.is_unsigned = col.is_unsigned; break;
      case ColumnKind::kYear: n.op = Op::kColYear; break;
      case ColumnKind::kDate: n.op = Op::kColDate; domain = Domain::kDate; break;
      case ColumnKind::kDatetime: n.op = Op::kColDatetime; domain = Domain::kDatetime; break;
      case ColumnKind::kTimestamp: n.op = Op::kColTimestamp; domain = Domain::kTimestamp; break;
      case ColumnKind::kTime: n.op = Op::kColTime; domain = Domain::kTime; break;
      case ColumnKind::kChar: n.op = Op::kColChar; cls = Cls::kString; break;
      case ColumnKind::kVarchar: case ColumnKind::kBlob: n.op = Op::kColString; cls = Cls::kString; break;
      case ColumnKind::kFloat: n.op = Op::kColFloat; cls = Cls::kDouble; break;
      case ColumnKind::kDouble: n.op = Op::kColDouble; cls = Cls::kDouble; break;
      case ColumnKind::kOther:
        return fail(a.pos, "column '" + col.name +
                               "' has a type which conditions do not support (DECIMAL, ENUM, SET, BIT, "
                               "INET6, UUID, spatial ...); use integer, date/time, string or floating-point columns");
    }
    if (cell_of_[index] < 0) cell_of_[index] = static_cast<int>(prog_->cell_count++);
    n.type = type_of(cls);
    n.a = static_cast<uint32_t>(cell_of_[index]);
    *out = Ref{add(n), cls, domain, &col.name, &col};
    return true;
  }

  bool numeric_operand(const Ref& r, Tok op, size_t pos, bool integer_only) {
    if (r.cls == Cls::kString)
      return fail(pos, std::string("'") + op_name(op) + "' needs numbers, not strings");
    if (integer_only && r.cls == Cls::kDouble)
      return fail(pos, std::string("'") + op_name(op) +
                           "' needs integers (floating-point values are not converted)");
    return true;
  }

  bool unary(const Ast& a, Ref* out) {
    Ref r;
    if (!value(*a.kids[0], &r)) return false;
    switch (a.op) {
      case Tok::kNot: case Tok::kBang:
        if (!truth_operand(r, a.pos)) return false;
        *out = Ref{node1(Op::kNot, Type::kInt, r.node), Cls::kInt};
        return true;
      case Tok::kPlus:
        if (!numeric_operand(r, a.op, a.pos, false)) return false;
        *out = Ref{r.node, r.cls};
        return true;
      case Tok::kMinus:
        if (!numeric_operand(r, a.op, a.pos, false)) return false;
        if (r.cls == Cls::kNull) { *out = r; return true; }
        *out = r.cls == Cls::kDouble ? Ref{node1(Op::kNegReal, Type::kDouble, r.node), Cls::kDouble}
                                     : Ref{node1(Op::kNeg, Type::kInt, r.node), Cls::kInt};
        return true;
      case Tok::kTilde:
        if (!numeric_operand(r, a.op, a.pos, true)) return false;
        if (r.cls == Cls::kNull) { *out = r; return true; }
        *out = Ref{node1(Op::kBitNot, Type::kInt, r.node), Cls::kInt};
        return true;
      default:
        return fail(a.pos, "unsupported unary operator");
    }
  }

  bool binary(const Ast& a, Ref* out) {
    Cmp cmp;
    switch (a.op) {
      case Tok::kEq: cmp = Cmp::kEq; break;
      case Tok::kNullSafeEq: cmp = Cmp::kNullSafeEq; break;
      case Tok::kNe: cmp = Cmp::kNe; break;
      case Tok::kLt: cmp = Cmp::kLt; break;
      case Tok::kLe: cmp = Cmp::kLe; break;
      case Tok::kGt: cmp = Cmp::kGt; break;
      case Tok::kGe: cmp = Cmp::kGe; break;
      case Tok::kXor: return logical_xor(a, out);
      default: return arithmetic(a, out);
    }
    std::vector<uint32_t> nodes;
    Cls cls;
    uint32_t collation;
    if (!comparable({a.kids[0].get(), a.kids[1].get()}, a.pos, &nodes, &cls, &collation)) return false;
    *out = Ref{node2(cmp_op(cls), Type::kInt, nodes[0], nodes[1], cmp), Cls::kInt};
    prog_->nodes[out->node].collation = collation;
    return true;
  }

  static Op cmp_op(Cls c) { return c == Cls::kString ? Op::kCmpString : c == Cls::kDouble ? Op::kCmpReal : Op::kCmpInt; }
  static Op in_op(Cls c) { return c == Cls::kString ? Op::kInString : c == Cls::kDouble ? Op::kInReal : Op::kInInt; }

  bool arithmetic(const Ast& a, Ref* out) {
    const bool integer_only = a.op == Tok::kAmp || a.op == Tok::kPipe || a.op == Tok::kCaret ||
                              a.op == Tok::kShl || a.op == Tok::kShr;
    Ref x, y;
    if (!value(*a.kids[0], &x) || !value(*a.kids[1], &y)) return false;
    if (!numeric_operand(x, a.op, a.pos, integer_only) || !numeric_operand(y, a.op, a.pos, integer_only))
      return false;
    if (x.cls == Cls::kNull || y.cls == Cls::kNull) { *out = null_ref(); return true; }
    const bool real = x.cls == Cls::kDouble || y.cls == Cls::kDouble;
    auto real_op = [&](Op op) {
      *out = Ref{node2(op, Type::kDouble, as(x, Cls::kDouble), as(y, Cls::kDouble)), Cls::kDouble};
      return true;
    };
    auto int_op = [&](Op op) {
      *out = Ref{node2(op, Type::kInt, x.node, y.node), Cls::kInt};
      return true;
    };
    switch (a.op) {
      case Tok::kPlus: return real ? real_op(Op::kAddReal) : int_op(Op::kAdd);
      case Tok::kMinus: return real ? real_op(Op::kSubReal) : int_op(Op::kSub);
      case Tok::kStar: return real ? real_op(Op::kMulReal) : int_op(Op::kMul);
      case Tok::kSlash: return real_op(Op::kDivReal);  // `/` never truncates (MySQL gives a decimal)
      case Tok::kPercent: return real ? real_op(Op::kModReal) : int_op(Op::kMod);
      case Tok::kDiv:
        if (!real) return int_op(Op::kIntDiv);
        *out = Ref{node2(Op::kIntDivReal, Type::kInt, as(x, Cls::kDouble), as(y, Cls::kDouble)), Cls::kInt};
        return true;
      case Tok::kAmp: return int_op(Op::kBitAnd);
      case Tok::kPipe: return int_op(Op::kBitOr);
      case Tok::kCaret: return int_op(Op::kBitXor);
      case Tok::kShl: return int_op(Op::kShl);
      case Tok::kShr: return int_op(Op::kShr);
      default: return fail(a.pos, "unsupported operator");
    }
  }

  bool logical_xor(const Ast& a, Ref* out) {
    Ref x, y;
    if (!value(*a.kids[0], &x) || !truth_operand(x, a.kids[0]->pos)) return false;
    if (!value(*a.kids[1], &y) || !truth_operand(y, a.kids[1]->pos)) return false;
    *out = Ref{node2(Op::kXor, Type::kInt, x.node, y.node), Cls::kInt};
    return true;
  }

  bool logical(const Ast& a, Ref* out) {
    std::vector<uint32_t> items;
    for (const auto& kid : a.kids) {
      Ref r;
      if (!value(*kid, &r) || !truth_operand(r, kid->pos)) return false;
      items.push_back(r.node);
    }
    uint32_t n = list(a.op == Tok::kAnd ? Op::kAnd : Op::kOr, 0, items);
    *out = Ref{n, Cls::kInt};
    return true;
  }

  bool is_test(const Ast& a, Ref* out) {
    Ref r;
    if (!value(*a.kids[0], &r)) return false;
    if (a.op != Tok::kNull && !truth_operand(r, a.pos)) return false;
    Op op = a.op == Tok::kTrue ? Op::kIsTrue : a.op == Tok::kFalse ? Op::kIsFalse : Op::kIsNull;
    uint32_t n = node1(op, Type::kInt, r.node);
    if (a.negated) n = node1(Op::kNot, Type::kInt, n);  // IS never yields NULL, so NOT is exact
    *out = Ref{n, Cls::kInt};
    return true;
  }

  bool between(const Ast& a, Ref* out) {
    std::vector<uint32_t> nodes;
    Cls cls;
    uint32_t collation;
    if (!comparable({a.kids[0].get(), a.kids[1].get(), a.kids[2].get()}, a.pos, &nodes, &cls, &collation))
      return false;
    // x BETWEEN lo AND hi  ==  x >= lo AND x <= hi (x's node is shared, not copied).
    uint32_t ge = node2(cmp_op(cls), Type::kInt, nodes[0], nodes[1], Cmp::kGe);
    uint32_t le = node2(cmp_op(cls), Type::kInt, nodes[0], nodes[2], Cmp::kLe);
    prog_->nodes[ge].collation = prog_->nodes[le].collation = collation;
    uint32_t n = list(Op::kAnd, 0, {ge, le});
    if (a.negated) n = node1(Op::kNot, Type::kInt, n);
    *out = Ref{n, Cls::kInt};
    return true;
  }

  bool in_list(const Ast& a, Ref* out) {
    std::vector<const Ast*> operands;
    for (const auto& kid : a.kids) operands.push_back(kid.get());
    std::vector<uint32_t> nodes;
    Cls cls;
    uint32_t collation;
    if (!comparable(operands, a.pos, &nodes, &cls, &collation)) return false;
    uint32_t n = list(in_op(cls), nodes[0], std::vector<uint32_t>(nodes.begin() + 1, nodes.end()));
    prog_->nodes[n].collation = collation;
    if (a.negated) n = node1(Op::kNot, Type::kInt, n);
    *out = Ref{n, Cls::kInt};
    return true;
  }

  // The column whose collation the string comparison of `refs` uses (as SQL decides it):
  // the columns' one collation, which literals take on; *column = null for bytes, if a column
  // is binary (VARBINARY, BLOB) or none is a column. Two columns under different collations
  // are refused.
  bool string_collation(const std::vector<Ref>& refs, size_t pos, const ColumnInfo** column) {
    const ColumnInfo* chosen = nullptr;
    bool binary = false;
    for (const Ref& r : refs) {
      if (!r.info || r.cls != Cls::kString) continue;
      if (!r.info->collate_compare) binary = true;
      else if (!chosen) chosen = r.info;
      else if (r.info->collation != chosen->collation)
        return fail(pos, "cannot compare column '" + chosen->name + "' (" + chosen->collation + ") with column '" +
                             r.info->name + "' (" + r.info->collation + "): their collations differ");
    }
    *column = binary ? nullptr : chosen;
    return true;
  }

  // Node::collation for comparisons under `column`'s collation (0: bytes, no column); one
  // Program::collations entry per collation.
  uint32_t collation_of(const ColumnInfo* column) {
    if (!column) return 0;
    for (size_t k = 0; k < collation_names_.size(); k++)
      if (collation_names_[k] == column->collation) return static_cast<uint32_t>(k + 1);
    collation_names_.push_back(column->collation);
    prog_->collations.push_back(column->collate_compare);
    return static_cast<uint32_t>(prog_->collations.size());
  }

  Ref string_constant(std::string text) {
    Node n;
    n.op = Op::kConstString;
    n.type = Type::kString;
    n.a = static_cast<uint32_t>(prog_->strings.size());
    prog_->strings.push_back(std::move(text));
    return Ref{add(n), Cls::kString};
  }

  // Compiles operands that are compared with each other (a = b, BETWEEN, IN) to
  // one common class: all strings (under string_collation(): *collation) or all numbers
  // (integer, or double if any operand is floating; *collation = 0). String literals
  // meeting a DATE/DATETIME/TIME column become that column's integer form. Everything else
  // mixing strings and numbers is rejected rather than guessed at.
  bool comparable(const std::vector<const Ast*>& operands, size_t pos, std::vector<uint32_t>* nodes,
                  Cls* cls, uint32_t* collation) {
    *collation = 0;
    const size_t n = operands.size();
    std::vector<Ref> refs(n);
    std::vector<bool> literal(n, false);
    bool has_string = false, has_number = false, has_literal = false, has_double = false;
    bool dom[5] = {false, false, false, false, false};
    const std::string* dom_column[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
    for (size_t i = 0; i < n; i++) {
      if (operands[i]->kind == Ast::Kind::kString) { literal[i] = has_literal = true; continue; }
      if (!value(*operands[i], &refs[i])) return false;
      has_string |= refs[i].cls == Cls::kString;
      has_number |= refs[i].cls == Cls::kInt || refs[i].cls == Cls::kDouble;
      has_double |= refs[i].cls == Cls::kDouble;
      if (refs[i].column && refs[i].domain != Domain::kNumber) {
        int d = static_cast<int>(refs[i].domain);
        dom[d] = true;
        if (!dom_column[d]) dom_column[d] = refs[i].column;
      }
    }
    if (has_string && has_number) return fail(pos, "cannot compare a string with a number");
    if (has_string || (has_literal && !has_number)) {
      *cls = Cls::kString;
      const ColumnInfo* column = nullptr;
      if (!string_collation(refs, pos, &column)) return false;
      *collation = collation_of(column);
      for (size_t i = 0; i < n; i++) {
        if (literal[i]) {  // in the character set of the column it meets, as SQL converts it
          std::string text = operands[i]->text;
          if (column && column->literal_to_column && !column->literal_to_column(operands[i]->text, &text))
            return fail(operands[i]->pos, "string '" + operands[i]->text + "' has characters that column '" +
                                              column->name + "' (" + column->collation + ") cannot hold");
          refs[i] = string_constant(std::move(text));
        }
        nodes->push_back(as(refs[i], Cls::kString));
      }
      return true;
    }

    const bool date = dom[static_cast<int>(Domain::kDate)], datetime = dom[static_cast<int>(Domain::kDatetime)];
    const bool time = dom[static_cast<int>(Domain::kTime)], ts = dom[static_cast<int>(Domain::kTimestamp)];
    auto column_named = [&](Domain d) {
      return std::string(domain_name(d)) + " column '" + *dom_column[static_cast<int>(d)] + "'";
    };
    if (ts && (date || datetime || time)) {
      Domain other = date ? Domain::kDate : datetime ? Domain::kDatetime : Domain::kTime;
      return fail(pos, "cannot compare " + column_named(Domain::kTimestamp) +
                           " (seconds since the epoch) with " + column_named(other));
    }
    if (time && (date || datetime))
      return fail(pos, "cannot compare " + column_named(Domain::kTime) + " with " +
                           column_named(date ? Domain::kDate : Domain::kDatetime));

    // Convert string literals to the temporal column's integer form.
    std::vector<DateLiteral> dates(n);
    std::vector<int64_t> times(n, 0);
    bool promote = date && datetime;  // DATE vs DATETIME compares as DATETIME
    for (size_t i = 0; i < n; i++) {
      if (!literal[i]) continue;
      const Ast& lit = *operands[i];
      std::string why;
      if (ts)
        return fail(lit.pos, column_named(Domain::kTimestamp) +
                                 " is compared as seconds since the epoch (UNIX_TIMESTAMP); "
                                 "compare it with a number, not a string");
      if (time) {
        if (!parse_time_literal(lit.text, &times[i], &why))
          return fail(lit.pos, "'" + lit.text + "' is not a valid time for " + column_named(Domain::kTime) +
                                   ": " + why);
      } else if (date || datetime) {
        Domain d = datetime ? Domain::kDatetime : Domain::kDate;
        if (!parse_date_literal(lit.text, &dates[i], &why))
          return fail(lit.pos, "'" + lit.text + "' is not a valid date for " + column_named(d) + ": " + why);
        promote |= date && dates[i].has_time;
      } else {
        return fail(lit.pos, "cannot compare a string with a number (write numbers without quotes)");
      }
    }
    *cls = has_double ? Cls::kDouble : Cls::kInt;
    for (size_t i = 0; i < n; i++) {
      uint32_t node;
      if (literal[i]) {
        Int v = time ? times[i] : (promote || datetime) ? dates[i].datetime : dates[i].date;
        node = as(Ref{const_int(v), Cls::kInt}, *cls);
      } else {
        Ref r = refs[i];
        if (promote && r.column && r.domain == Domain::kDate)
          r.node = node2(Op::kMul, Type::kInt, r.node, const_int(1000000));  // YYYYMMDD000000
        node = as(r, *cls);
      }
      nodes->push_back(node);
    }
    return true;
  }

  // The payload stores columns in table order, so evaluation walks columns
  // 0 .. last referenced once, keeping only the referenced ones.
  bool plan_walk() {
    prog_->null_bytes = schema_.null_bytes;
    int last = -1;
    for (size_t i = 0; i < cell_of_.size(); i++)
      if (cell_of_[i] >= 0) last = static_cast<int>(i);
    for (int i = 0; i <= last; i++) {
      const ColumnInfo& col = schema_.columns[i];
      WalkStep s;
      s.null_mask = col.null_mask;
      s.null_byte = col.null_byte;
      if (col.null_mask && col.null_byte >= schema_.null_bytes)
        return fail(0, "table schema is inconsistent: column '" + col.name + "' has its NULL flag outside the NULL area");
      if (cell_of_[i] >= 0) {
        s.referenced = true;
        s.cell = static_cast<uint32_t>(cell_of_[i]);
        accepted_lengths(col.kind, &s.min_len, &s.max_len);
      }
      prog_->walk.push_back(s);
    }
    return true;
  }

  static void accepted_lengths(ColumnKind kind, uint32_t* min, uint32_t* max) {
    switch (kind) {
      case ColumnKind::kInt: *min = 1; *max = 8; break;
      case ColumnKind::kYear: *min = 1; *max = 1; break;
      case ColumnKind::kDate: *min = 3; *max = 3; break;
      case ColumnKind::kDatetime: *min = 5; *max = 8; break;
      case ColumnKind::kTimestamp: *min = 4; *max = 7; break;
      case ColumnKind::kTime: *min = 3; *max = 6; break;
      case ColumnKind::kFloat: *min = 4; *max = 4; break;
      case ColumnKind::kDouble: *min = 8; *max = 8; break;
      default: *min = 0; *max = UINT32_MAX; break;
    }
  }

  const TableSchema& schema_;
  Program* prog_;
  CondError* err_;
  std::vector<int> cell_of_;  // column index -> cell, -1 if not referenced
  std::vector<std::string> collation_names_;  // Program::collations' names, in order
};

}  // namespace

bool compile_ast(const Ast& root, const TableSchema& schema, Program* out, CondError* err) {
  return Compiler(schema, out, err).run(root);
}

namespace {

void mark_named(const Ast& a, const TableSchema& schema, std::vector<bool>* named) {
  if (a.kind == Ast::Kind::kColumn) {
    for (size_t i = 0; i < schema.columns.size(); i++)
      if (names_equal(schema.columns[i].name, a.text)) (*named)[i] = true;
  }
  for (const auto& kid : a.kids) mark_named(*kid, schema, named);  // depth is bounded by the parser
}

}  // namespace

std::vector<std::string> named_columns(const Ast& root, const TableSchema& schema) {
  std::vector<bool> named(schema.columns.size(), false);
  mark_named(root, schema, &named);
  std::vector<std::string> out;
  for (size_t i = 0; i < named.size(); i++)
    if (named[i]) out.push_back(schema.columns[i].name);
  return out;
}

}  // namespace q4m::cond
