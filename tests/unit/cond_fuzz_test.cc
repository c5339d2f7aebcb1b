// Fuzz-style robustness: random and mutated conditions must only ever compile
// (Ok) or be rejected (kInvalid), and compiled ones must evaluate any payload,
// malformed or not, without crashing.
#include <random>

#include "check.h"
#include "cond_test_util.h"

using namespace cond_test;

namespace {

TableSchema schema() {
  return SchemaBuilder()
      .col("a", ColumnKind::kInt, 4)
      .col("u", ColumnKind::kInt, 8, true)
      .col("s", ColumnKind::kVarchar)
      .col("c", ColumnKind::kChar, 4)
      .col("d", ColumnKind::kDate, 3)
      .col("dt", ColumnKind::kDatetime, 5)
      .col("ts", ColumnKind::kTimestamp, 4)
      .col("t", ColumnKind::kTime, 3)
      .col("f", ColumnKind::kDouble, 8)
      .col("x", ColumnKind::kOther, 2)
      .build();
}

std::vector<std::string> rows(const TableSchema& s) {
  std::vector<std::string> r;
  r.push_back(payload(s, {int_bytes(-5, 4), uint_bytes(UINT64_MAX, 8), std::string("hello"), std::string("ab  "),
                          date_bytes(2024, 1, 2), datetime_bytes(2024, 1, 2, 3, 4, 5), timestamp_bytes(1),
                          time_bytes(true, 1, 0, 0), double_bytes(0.5), std::string("xy")}));
  r.push_back(payload(s, {std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                          std::nullopt, std::nullopt, std::nullopt, std::nullopt}));
  r.push_back("");
  r.push_back(std::string(3, '\0'));
  r.push_back(r[0].substr(0, r[0].size() / 2));
  std::string garbage = r[0];
  for (size_t i = 2; i < garbage.size(); i += 3) garbage[i] = static_cast<char>(0xff);
  r.push_back(garbage);
  return r;
}

const char* const kVocabulary[] = {
    "a", "u", "s", "c", "d", "dt", "ts", "t", "f", "x", "`a`", "`nope`", "zz", "0", "1", "-1",
    "18446744073709551615", "9223372036854775808", "0x7f", "0xffffffffffffffff", "1.5", "1e308", ".5",
    "'abc'", "'2024-01-02'", "'2024-01-02 03:04:05'", "'-01:00:00'", "\"q\"", "''", "'\\''", "NULL", "TRUE",
    "FALSE", "UNKNOWN", "(", ")", "(", ")", ",", "+", "-", "*", "/", "%", "DIV", "MOD", "^", "~", "!", "&",
    "|", "<<", ">>", "=", "<=>", "!=", "<>", "<", "<=", ">", ">=", "IS", "NOT", "NULL", "BETWEEN", "AND",
    "IN", "&&", "OR", "||", "XOR", "'", "`", "\\", "@", "\xc3\xa9", "\xff"};

const char* const kSeeds[] = {
    "a > 3 AND s = 'x'", "u BETWEEN 1 AND 18446744073709551615 OR d = '2024-01-02'",
    "NOT (a IN (1, 2, NULL)) XOR c <=> 'ab'", "(a + u * 2) DIV 0 IS NULL", "dt > '2024-01-01 00:00:00' && t < 0",
    "f / a > 1.5 || ts = 1", "~a & 0xff << 2 | 1 ^ 3 = a % 7", "s IS NOT NULL AND s NOT BETWEEN 'a' AND 'z'"};

void exercise(const std::string& expr, const TableSchema& s, const std::vector<std::string>& rs, int* ok, int* bad,
              int* wrong_code) {
  std::shared_ptr<const q4m::RowFilter> f;
  q4m::Status st = q4m::cond::compile(expr, s, &f);
  if (st.ok()) {
    (*ok)++;
    for (const auto& r : rs) (void)f->matches(r);
  } else if (st.code() == q4m::ErrorCode::kInvalid && st.message().find(" at position ") != std::string::npos) {
    (*bad)++;
  } else {
    (*wrong_code)++;
    std::fprintf(stderr, "  unexpected status for [%s]: %s\n", expr.c_str(), st.message().c_str());
  }
}

}  // namespace

TEST(random_token_sequences) {
  TableSchema s = schema();
  auto rs = rows(s);
  std::mt19937 rng(12345);
  int ok = 0, bad = 0, wrong = 0;
  for (int i = 0; i < 20000; i++) {
    std::string e;
    int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; k++) {
      e += kVocabulary[rng() % (sizeof kVocabulary / sizeof *kVocabulary)];
      if (rng() % 4) e += ' ';
    }
    exercise(e, s, rs, &ok, &bad, &wrong);
  }
  std::printf("random tokens: %d compiled, %d rejected\n", ok, bad);
  CHECK_EQ(wrong, 0);
  CHECK(ok > 100);  // the generator does reach the evaluator
}

TEST(mutated_valid_conditions) {
  TableSchema s = schema();
  auto rs = rows(s);
  std::mt19937 rng(777);
  int ok = 0, bad = 0, wrong = 0;
  for (const char* seed : kSeeds) {
    CHECK(compile_ok(seed, s) != nullptr);  // every seed is valid
    for (int i = 0; i < 3000; i++) {
      std::string e = seed;
      int edits = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < edits && !e.empty(); k++) {
        size_t at = rng() % e.size();
        switch (rng() % 4) {
          case 0: e.erase(at, 1 + rng() % 3); break;
          case 1: e.insert(at, kVocabulary[rng() % (sizeof kVocabulary / sizeof *kVocabulary)]); break;
          case 2: e[at] = static_cast<char>(rng()); break;
          default: e.resize(at); break;
        }
      }
      exercise(e, s, rs, &ok, &bad, &wrong);
    }
  }
  std::printf("mutations: %d compiled, %d rejected\n", ok, bad);
  CHECK_EQ(wrong, 0);
}

TEST(random_bytes) {
  TableSchema s = schema();
  auto rs = rows(s);
  std::mt19937 rng(99);
  int ok = 0, bad = 0, wrong = 0;
  for (int i = 0; i < 5000; i++) {
    std::string e(rng() % 40, '\0');
    for (auto& ch : e) ch = static_cast<char>(rng());
    exercise(e, s, rs, &ok, &bad, &wrong);
  }
  CHECK_EQ(wrong, 0);
}

TEST(random_payloads_against_a_fixed_condition) {
  TableSchema s = schema();
  auto f = compile_ok("a > 0 OR u > 1 OR s = 'x' OR c = 'ab' OR d > '2000-01-01' OR dt IS NULL OR ts < 5 "
                      "OR t <> 0 OR f > 0.25",
                      s);
  REQUIRE(f);
  std::mt19937 rng(4242);
  for (int i = 0; i < 20000; i++) {
    std::string p(rng() % 64, '\0');
    for (auto& ch : p) ch = static_cast<char>(rng());
    (void)f->matches(p);
  }
  CHECK(f->matches(rows(s)[0]));
}
