#include "cond/lexer.h"

#include <charconv>
#include <cstring>

namespace q4m::cond {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
// Bytes >= 0x80 are accepted so that UTF-8 column names need no backquotes.
bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

bool iequals(std::string_view a, const char* b) {
  size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; i++) {
    char c = a[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c != b[i]) return false;
  }
  return true;
}

Tok keyword_or_ident(std::string_view word) {
  static const struct { const char* name; Tok tok; } kKeywords[] = {
      {"AND", Tok::kAnd}, {"OR", Tok::kOr}, {"XOR", Tok::kXor}, {"NOT", Tok::kNot},
      {"IS", Tok::kIs}, {"NULL", Tok::kNull}, {"TRUE", Tok::kTrue}, {"FALSE", Tok::kFalse},
      {"UNKNOWN", Tok::kUnknown}, {"BETWEEN", Tok::kBetween}, {"IN", Tok::kIn},
      {"DIV", Tok::kDiv}, {"MOD", Tok::kPercent}};
  for (const auto& k : kKeywords)
    if (iequals(word, k.name)) return k.tok;
  return Tok::kIdent;
}

class Lexer {
 public:
  Lexer(std::string_view src, std::vector<Token>* out, CondError* err) : src_(src), out_(out), err_(err) {}

  bool run() {
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) pos_++;
      if (pos_ >= src_.size()) break;
      if (!next()) return false;
    }
    Token end;
    end.kind = Tok::kEnd;
    end.pos = src_.size();
    out_->push_back(std::move(end));
    return true;
  }

 private:
  bool fail(size_t at, std::string what) {
    err_->offset = at;
    err_->what = std::move(what);
    err_->syntax = true;
    return false;
  }

  void emit(Tok kind, size_t start, Token tok = Token()) {
    tok.kind = kind;
    tok.pos = start;
    tok.raw = src_.substr(start, pos_ - start);
    out_->push_back(std::move(tok));
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }

  bool next() {
    const size_t start = pos_;
    const char c = src_[pos_];
    if (is_digit(c) || (c == '.' && is_digit(peek(1)))) return number();
    if (c == '\'' || c == '"') return string_literal();
    if (c == '`') return quoted_ident();
    if (is_ident_start(c)) {
      while (pos_ < src_.size() && is_ident_char(src_[pos_])) pos_++;
      std::string_view word = src_.substr(start, pos_ - start);
      Token t;
      Tok kind = keyword_or_ident(word);
      if (kind == Tok::kIdent) t.text = std::string(word);
      emit(kind, start, std::move(t));
      return true;
    }
    return punctuation();
  }

  bool punctuation() {
    const size_t start = pos_;
    const char c = src_[pos_];
    const char d = peek(1);
    Tok kind;
    size_t len = 1;
    switch (c) {
      case '(': kind = Tok::kLParen; break;
      case ')': kind = Tok::kRParen; break;
      case ',': kind = Tok::kComma; break;
      case '+': kind = Tok::kPlus; break;
      case '-': kind = Tok::kMinus; break;
      case '*': kind = Tok::kStar; break;
      case '/': kind = Tok::kSlash; break;
      case '%': kind = Tok::kPercent; break;
      case '^': kind = Tok::kCaret; break;
      case '~': kind = Tok::kTilde; break;
      case '=': kind = Tok::kEq; break;
      case '!':
        if (d == '=') { kind = Tok::kNe; len = 2; } else { kind = Tok::kBang; }
        break;
      case '&':
        if (d == '&') { kind = Tok::kAnd; len = 2; } else { kind = Tok::kAmp; }
        break;
      case '|':
        if (d == '|') { kind = Tok::kOr; len = 2; } else { kind = Tok::kPipe; }
        break;
      case '<':
        if (d == '=' && peek(2) == '>') { kind = Tok::kNullSafeEq; len = 3; }
        else if (d == '=') { kind = Tok::kLe; len = 2; }
        else if (d == '>') { kind = Tok::kNe; len = 2; }
        else if (d == '<') { kind = Tok::kShl; len = 2; }
        else { kind = Tok::kLt; }
        break;
      case '>':
        if (d == '=') { kind = Tok::kGe; len = 2; }
        else if (d == '>') { kind = Tok::kShr; len = 2; }
        else { kind = Tok::kGt; }
        break;
      default: {
        std::string shown = (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
                                ? "byte 0x" + hex_byte(c)
                                : std::string("character '") + c + "'";
        return fail(start, "unexpected " + shown);
      }
    }
    pos_ += len;
    emit(kind, start);
    return true;
  }

  static std::string hex_byte(char c) {
    static const char kDigits[] = "0123456789abcdef";
    unsigned char b = static_cast<unsigned char>(c);
    return std::string{kDigits[b >> 4], kDigits[b & 15]};
  }

  bool number() {
    const size_t start = pos_;
    Token t;
    if (src_[pos_] == '0' && (peek(1) == 'x' || peek(1) == 'X') && is_hex(peek(2))) {
      pos_ += 2;
      uint64_t v = 0;
      for (; pos_ < src_.size() && is_hex(src_[pos_]); pos_++) {
        char h = src_[pos_];
        unsigned digit = is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10;
        if (v >> 60) return fail(start, "hex literal is larger than 64 bits");
        v = v << 4 | digit;
      }
      if (pos_ < src_.size() && is_ident_char(src_[pos_])) return fail(start, "malformed hex literal");
      t.ival = v;
      emit(Tok::kInt, start, std::move(t));
      return true;
    }
    bool decimal = false;
    while (pos_ < src_.size() && is_digit(src_[pos_])) pos_++;
    if (peek() == '.') {
      decimal = true;
      pos_++;
      while (pos_ < src_.size() && is_digit(src_[pos_])) pos_++;
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t exp = pos_ + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) exp++;
      if (exp < src_.size() && is_digit(src_[exp])) {
        decimal = true;
        pos_ = exp;
        while (pos_ < src_.size() && is_digit(src_[pos_])) pos_++;
      }
    }
    if (pos_ < src_.size() && is_ident_char(src_[pos_]))
      return fail(start, "malformed number '" + std::string(src_.substr(start, pos_ + 1 - start)) + "'");
    std::string_view text = src_.substr(start, pos_ - start);
    if (decimal) {
      double d = 0;
      auto r = std::from_chars(text.data(), text.data() + text.size(), d);
      if (r.ec != std::errc() || r.ptr != text.data() + text.size())
        return fail(start, "number '" + std::string(text) + "' is out of range");
      t.dval = d;
      emit(Tok::kDecimal, start, std::move(t));
      return true;
    }
    uint64_t v = 0;
    for (char ch : text) {
      uint64_t digit = static_cast<uint64_t>(ch - '0');
      if (v > (UINT64_MAX - digit) / 10)
        return fail(start, "integer " + std::string(text) + " is out of range (largest is 18446744073709551615)");
      v = v * 10 + digit;
    }
    t.ival = v;
    emit(Tok::kInt, start, std::move(t));
    return true;
  }

  // MySQL escapes: \0 \b \n \r \t \Z, \% and \_ keep their backslash, any other \x is x;
  // a doubled quote stands for itself.
  bool string_literal() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    Token t;
    while (true) {
      if (pos_ >= src_.size()) return fail(start, "unterminated string");
      char c = src_[pos_++];
      if (c == quote) {
        if (peek() == quote) { t.text.push_back(quote); pos_++; continue; }
        break;
      }
      if (c != '\\') { t.text.push_back(c); continue; }
      if (pos_ >= src_.size()) return fail(start, "unterminated string");
      char e = src_[pos_++];
      switch (e) {
        case '0': t.text.push_back('\0'); break;
        case 'b': t.text.push_back('\b'); break;
        case 'n': t.text.push_back('\n'); break;
        case 'r': t.text.push_back('\r'); break;
        case 't': t.text.push_back('\t'); break;
        case 'Z': t.text.push_back('\x1a'); break;
        case '%': case '_': t.text.push_back('\\'); t.text.push_back(e); break;
        default: t.text.push_back(e); break;
      }
    }
    emit(Tok::kString, start, std::move(t));
    return true;
  }

  bool quoted_ident() {
    const size_t start = pos_++;
    Token t;
    while (true) {
      if (pos_ >= src_.size()) return fail(start, "unterminated `quoted name`");
      char c = src_[pos_++];
      if (c == '`') {
        if (peek() == '`') { t.text.push_back('`'); pos_++; continue; }
        break;
      }
      t.text.push_back(c);
    }
    if (t.text.empty()) return fail(start, "empty column name ``");
    emit(Tok::kIdent, start, std::move(t));
    return true;
  }

  std::string_view src_;
  std::vector<Token>* out_;
  CondError* err_;
  size_t pos_ = 0;
};

}  // namespace

bool tokenize(std::string_view src, std::vector<Token>* out, CondError* err) {
  return Lexer(src, out, err).run();
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd: return "end of condition";
    case Tok::kIdent: return "name '" + t.text + "'";
    case Tok::kString: return "string " + std::string(t.raw.substr(0, 40)) + (t.raw.size() > 40 ? "..." : "");
    case Tok::kInt: case Tok::kDecimal: return "number " + std::string(t.raw);
    default: return "'" + std::string(t.raw) + "'";
  }
}

}  // namespace q4m::cond
