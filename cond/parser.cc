#include "cond/parser.h"

#include <utility>
#include <vector>

#include "cond/lexer.h"

namespace q4m::cond {
namespace {

using AstPtr = std::unique_ptr<Ast>;

// Binding strength, weakest first (MySQL's table, with HIGH_NOT_PRECEDENCE off:
// NOT is weak, ! is a strong prefix operator).
enum Prec : int {
  kPrecOr = 1,
  kPrecXor,
  kPrecAnd,
  kPrecNot,          // prefix NOT
  kPrecCompare,      // = <=> != < <= > >= IS
  kPrecPredicate,    // [NOT] BETWEEN, [NOT] IN
  kPrecBitOr,
  kPrecBitAnd,
  kPrecShift,
  kPrecAdd,
  kPrecMul,
  kPrecBitXor,
  kPrecUnary,        // - + ~ !
};

int infix_prec(Tok t) {
  switch (t) {
    case Tok::kOr: return kPrecOr;
    case Tok::kXor: return kPrecXor;
    case Tok::kAnd: return kPrecAnd;
    case Tok::kEq: case Tok::kNullSafeEq: case Tok::kNe: case Tok::kLt: case Tok::kLe:
    case Tok::kGt: case Tok::kGe: case Tok::kIs:
      return kPrecCompare;
    case Tok::kBetween: case Tok::kIn: return kPrecPredicate;
    case Tok::kPipe: return kPrecBitOr;
    case Tok::kAmp: return kPrecBitAnd;
    case Tok::kShl: case Tok::kShr: return kPrecShift;
    case Tok::kPlus: case Tok::kMinus: return kPrecAdd;
    case Tok::kStar: case Tok::kSlash: case Tok::kDiv: case Tok::kPercent: return kPrecMul;
    case Tok::kCaret: return kPrecBitXor;
    default: return 0;
  }
}

class Parser {
 public:
  Parser(std::vector<Token> toks, CondError* err) : toks_(std::move(toks)), err_(err) {}

  AstPtr parse_all() {
    AstPtr e = parse_expr(0);
    if (!e) return nullptr;
    if (peek().kind != Tok::kEnd)
      return fail(peek().pos, "unexpected " + describe(peek()) + ", expected an operator or the end");
    return e;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    size_t i = next_ + ahead;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  const Token& take() { const Token& t = peek(); if (next_ + 1 < toks_.size()) next_++; return t; }

  AstPtr fail(size_t at, std::string what) {
    if (!failed_) {
      failed_ = true;
      err_->offset = at;
      err_->what = std::move(what);
      err_->syntax = true;
    }
    return nullptr;
  }

  // Sets the node's depth from its children; rejects trees deep enough to
  // threaten the stack of whoever walks them later.
  AstPtr finish(AstPtr n) {
    int d = 0;
    for (const auto& k : n->kids) d = k->depth > d ? k->depth : d;
    n->depth = d + 1;
    if (n->depth > kMaxAstDepth) return fail(n->pos, "condition is too deeply nested");
    return n;
  }

  struct NestingGuard {
    explicit NestingGuard(int* n) : n_(n) { ++*n_; }
    ~NestingGuard() { --*n_; }
    int* n_;
  };

  AstPtr parse_expr(int min_prec) {
    NestingGuard guard(&nesting_);
    if (nesting_ > kMaxNesting) return fail(peek().pos, "condition is too deeply nested");
    AstPtr lhs = parse_prefix(min_prec);
    while (lhs) {
      const Token& t = peek();
      // NOT directly before IN / BETWEEN negates them; anything else is not infix.
      bool negated = t.kind == Tok::kNot &&
                     (peek(1).kind == Tok::kIn || peek(1).kind == Tok::kBetween);
      Tok op = negated ? peek(1).kind : t.kind;
      int prec = infix_prec(op);
      if (prec == 0 || prec < min_prec) break;
      const size_t pos = t.pos;
      if (negated) take();
      take();
      switch (op) {
        case Tok::kAnd: case Tok::kOr: lhs = parse_logical_chain(op, pos, std::move(lhs)); break;
        case Tok::kIs: lhs = parse_is(pos, std::move(lhs)); break;
        case Tok::kIn: lhs = parse_in(pos, negated, std::move(lhs)); break;
        case Tok::kBetween: lhs = parse_between(pos, negated, std::move(lhs)); break;
        default: {
          // Comparisons take a predicate on the right (so `a = b BETWEEN 1 AND 2` is
          // `a = (b BETWEEN 1 AND 2)`); all binary operators are left-associative.
          AstPtr rhs = parse_expr(prec + 1);
          if (!rhs) return nullptr;
          auto n = std::make_unique<Ast>(Ast::Kind::kBinary, pos);
          n->op = op;
          n->kids.push_back(std::move(lhs));
          n->kids.push_back(std::move(rhs));
          lhs = finish(std::move(n));
        }
      }
    }
    return lhs;
  }

  AstPtr parse_logical_chain(Tok op, size_t pos, AstPtr first) {
    auto n = std::make_unique<Ast>(Ast::Kind::kLogical, pos);
    n->op = op;
    n->kids.push_back(std::move(first));
    const int prec = infix_prec(op);
    while (true) {
      AstPtr rhs = parse_expr(prec + 1);
      if (!rhs) return nullptr;
      n->kids.push_back(std::move(rhs));
      if (peek().kind != op) break;
      take();
    }
    return finish(std::move(n));
  }

  AstPtr parse_is(size_t pos, AstPtr lhs) {
    auto n = std::make_unique<Ast>(Ast::Kind::kIsTest, pos);
    if (peek().kind == Tok::kNot) { take(); n->negated = true; }
    const Token& t = peek();
    if (t.kind != Tok::kNull && t.kind != Tok::kTrue && t.kind != Tok::kFalse && t.kind != Tok::kUnknown)
      return fail(t.pos, "expected NULL, TRUE, FALSE or UNKNOWN after IS, found " + describe(t));
    n->op = take().kind;
    n->kids.push_back(std::move(lhs));
    return finish(std::move(n));
  }

  AstPtr parse_in(size_t pos, bool negated, AstPtr lhs) {
    auto n = std::make_unique<Ast>(Ast::Kind::kIn, pos);
    n->negated = negated;
    n->kids.push_back(std::move(lhs));
    if (peek().kind != Tok::kLParen) return fail(peek().pos, "expected '(' after IN, found " + describe(peek()));
    take();
    while (true) {
      AstPtr item = parse_expr(0);
      if (!item) return nullptr;
      n->kids.push_back(std::move(item));
      if (peek().kind == Tok::kComma) { take(); continue; }
      if (peek().kind == Tok::kRParen) { take(); break; }
      return fail(peek().pos, "expected ',' or ')' in the IN list, found " + describe(peek()));
    }
    return finish(std::move(n));
  }

  AstPtr parse_between(size_t pos, bool negated, AstPtr lhs) {
    auto n = std::make_unique<Ast>(Ast::Kind::kBetween, pos);
    n->negated = negated;
    AstPtr lo = parse_expr(kPrecBitOr);
    if (!lo) return nullptr;
    if (peek().kind != Tok::kAnd)
      return fail(peek().pos, "expected AND after BETWEEN's lower bound, found " + describe(peek()));
    take();
    AstPtr hi = parse_expr(kPrecPredicate);
    if (!hi) return nullptr;
    n->kids.push_back(std::move(lhs));
    n->kids.push_back(std::move(lo));
    n->kids.push_back(std::move(hi));
    return finish(std::move(n));
  }

  AstPtr parse_prefix(int min_prec) {
    const Token& t = peek();
    const size_t pos = t.pos;
    switch (t.kind) {
      case Tok::kNot: {
        if (min_prec > kPrecNot)
          return fail(pos, "NOT cannot be used here without parentheses (write ... (NOT x))");
        take();
        return unary(Tok::kNot, pos, parse_expr(kPrecNot));
      }
      case Tok::kMinus: case Tok::kPlus: case Tok::kTilde: case Tok::kBang: {
        // Prefix operators recurse without passing through parse_expr: count them here.
        NestingGuard guard(&nesting_);
        if (nesting_ > kMaxNesting) return fail(pos, "condition is too deeply nested");
        Tok op = take().kind;
        return unary(op, pos, parse_prefix(kPrecUnary));
      }
      case Tok::kLParen: {
        take();
        AstPtr e = parse_expr(0);
        if (!e) return nullptr;
        if (peek().kind != Tok::kRParen) return fail(peek().pos, "expected ')', found " + describe(peek()));
        take();
        return e;
      }
      case Tok::kInt: case Tok::kTrue: case Tok::kFalse: {
        auto n = std::make_unique<Ast>(Ast::Kind::kInt, pos);
        n->ival = t.kind == Tok::kInt ? t.ival : (t.kind == Tok::kTrue ? 1 : 0);
        take();
        return n;
      }
      case Tok::kDecimal: {
        auto n = std::make_unique<Ast>(Ast::Kind::kDecimal, pos);
        n->dval = t.dval;
        take();
        return n;
      }
      case Tok::kString: case Tok::kIdent: {
        auto n = std::make_unique<Ast>(t.kind == Tok::kString ? Ast::Kind::kString : Ast::Kind::kColumn, pos);
        n->text = t.text;
        take();
        return n;
      }
      case Tok::kNull: take(); return std::make_unique<Ast>(Ast::Kind::kNull, pos);
      default:
        return fail(pos, "expected a column, a literal or '(', found " + describe(t));
    }
  }

  AstPtr unary(Tok op, size_t pos, AstPtr operand) {
    if (!operand) return nullptr;
    auto n = std::make_unique<Ast>(Ast::Kind::kUnary, pos);
    n->op = op;
    n->kids.push_back(std::move(operand));
    return finish(std::move(n));
  }

  std::vector<Token> toks_;
  CondError* err_;
  size_t next_ = 0;
  int nesting_ = 0;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<Ast> parse(std::string_view src, CondError* err) {
  std::vector<Token> toks;
  if (!tokenize(src, &toks, err)) return nullptr;
  return Parser(std::move(toks), err).parse_all();
}

}  // namespace q4m::cond
