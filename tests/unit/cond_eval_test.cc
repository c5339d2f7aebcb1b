// Conditions over integer columns: every operator, precedence, NULL logic,
// integer widths and signedness.
#include <atomic>
#include <thread>

#include "check.h"
#include "cond_test_util.h"
#include "core/util/stats.h"

using namespace cond_test;

namespace {

TableSchema int_schema() {
  return SchemaBuilder()
      .col("i8", ColumnKind::kInt, 1).col("u8", ColumnKind::kInt, 1, true)
      .col("i16", ColumnKind::kInt, 2).col("u16", ColumnKind::kInt, 2, true)
      .col("i24", ColumnKind::kInt, 3).col("u24", ColumnKind::kInt, 3, true)
      .col("i32", ColumnKind::kInt, 4).col("u32", ColumnKind::kInt, 4, true)
      .col("i64", ColumnKind::kInt, 8).col("u64", ColumnKind::kInt, 8, true)
      .col("n", ColumnKind::kInt, 4)
      .col("Prio", ColumnKind::kInt, 4, false, /*nullable=*/false)
      .build();
}

// Negative signed values of every width and unsigned values with the top bit set:
// the original sign-extended unsigned columns.
std::string int_row(const TableSchema& s) {
  return payload(s, {int_bytes(-100, 1), uint_bytes(200, 1),
                     int_bytes(-30000, 2), uint_bytes(60000, 2),
                     int_bytes(-8000000, 3), uint_bytes(16000000, 3),
                     int_bytes(-2000000000, 4), uint_bytes(4000000000u, 4),
                     int_bytes(INT64_MIN, 8), uint_bytes(UINT64_MAX - 1, 8),
                     std::nullopt, int_bytes(5, 4)});
}

struct Fixture {
  TableSchema s = int_schema();
  std::string row = int_row(s);
  std::string t(const std::string& e) const { return truth(e, s, row); }
};

}  // namespace

TEST(int_widths_signed_and_unsigned) {
  Fixture f;
  CHECK_EQ(f.t("i8 = -100"), "T");
  CHECK_EQ(f.t("u8 = 200"), "T");
  CHECK_EQ(f.t("i16 = -30000"), "T");
  CHECK_EQ(f.t("u16 = 60000"), "T");
  CHECK_EQ(f.t("i24 = -8000000"), "T");
  CHECK_EQ(f.t("u24 = 16000000"), "T");
  CHECK_EQ(f.t("i32 = -2000000000"), "T");
  CHECK_EQ(f.t("u32 = 4000000000"), "T");
  CHECK_EQ(f.t("i64 = -9223372036854775808"), "T");
  CHECK_EQ(f.t("u64 = 18446744073709551614"), "T");
  CHECK_EQ(f.t("u64 > 9223372036854775807"), "T");
  CHECK_EQ(f.t("u64 > 0"), "T");
  CHECK_EQ(f.t("u64 > i64"), "T");
  CHECK_EQ(f.t("i64 < 0"), "T");
  CHECK_EQ(f.t("u8 > 127 AND u16 > 32767 AND u24 > 8388607 AND u32 > 2147483647"), "T");
  CHECK_EQ(f.t("u64 = 0xFFFFFFFFFFFFFFFE"), "T");
  CHECK_EQ(f.t("PRIO = 5 AND prio = 5 AND `prio` = 5"), "T");
}

TEST(arithmetic_is_exact_across_signedness) {
  Fixture f;
  CHECK_EQ(f.t("u64 + 1 = 18446744073709551615"), "T");
  CHECK_EQ(f.t("u64 + 2"), "N");                        // beyond BIGINT UNSIGNED
  CHECK_EQ(f.t("i64 - 1"), "N");                        // below BIGINT
  CHECK_EQ(f.t("u64 + i64 = 9223372036854775806"), "T");
  CHECK_EQ(f.t("u8 - 201 = -1"), "T");                  // unsigned column, negative result
  CHECK_EQ(f.t("-i64 = 9223372036854775808"), "T");
  CHECK_EQ(f.t("u64 * 2"), "N");
  CHECK_EQ(f.t("u64 * u64"), "N");                      // overflows even 128 bits
  CHECK_EQ(f.t("7 * -3 = -21"), "T");
  CHECK_EQ(f.t("prio * 3 - 1 = 14"), "T");
}

TEST(division_and_modulo) {
  Fixture f;
  CHECK_EQ(f.t("7 DIV 2 = 3"), "T");
  CHECK_EQ(f.t("-7 DIV 2 = -3"), "T");
  CHECK_EQ(f.t("7 / 2 = 3.5"), "T");          // `/` does not truncate
  CHECK_EQ(f.t("prio / 2 > 2"), "T");
  CHECK_EQ(f.t("7 % 3 = 1"), "T");
  CHECK_EQ(f.t("-7 % 3 = -1"), "T");
  CHECK_EQ(f.t("7 MOD -3 = 1"), "T");
  CHECK_EQ(f.t("u64 % 10 = 4"), "T");
  CHECK_EQ(f.t("prio DIV 0"), "N");
  CHECK_EQ(f.t("prio / 0"), "N");
  CHECK_EQ(f.t("prio % 0"), "N");
  CHECK_EQ(f.t("prio MOD 0 IS NULL"), "T");
  CHECK_EQ(f.t("7.5 DIV 2 = 3"), "T");
  CHECK_EQ(f.t("7.5 % 2 = 1.5"), "T");
}

TEST(bit_operators_work_on_64_bit_patterns) {
  Fixture f;
  CHECK_EQ(f.t("~0 = 18446744073709551615"), "T");
  CHECK_EQ(f.t("-1 & 0xff = 255"), "T");
  CHECK_EQ(f.t("6 | 9 = 15"), "T");
  CHECK_EQ(f.t("6 ^ 3 = 5"), "T");
  CHECK_EQ(f.t("1 << 63 = 9223372036854775808"), "T");
  CHECK_EQ(f.t("1 << 64 = 0"), "T");
  CHECK_EQ(f.t("-1 >> 1 = 9223372036854775807"), "T");
  CHECK_EQ(f.t("256 >> 4 = 16"), "T");
  CHECK_EQ(f.t("prio & 4 = 4"), "T");
  CHECK_EQ(f.t("i8 & 0xff = 156"), "T");      // -100 as a two's complement pattern
  CHECK_EQ(f.t("n & 1"), "N");
}

TEST(comparisons) {
  Fixture f;
  CHECK_EQ(f.t("prio = 5"), "T");
  CHECK_EQ(f.t("prio != 5"), "F");
  CHECK_EQ(f.t("prio <> 4"), "T");
  CHECK_EQ(f.t("prio < 6 AND prio <= 5 AND prio > 4 AND prio >= 5"), "T");
  CHECK_EQ(f.t("prio < 5"), "F");
  CHECK_EQ(f.t("prio <=> 5"), "T");
  CHECK_EQ(f.t("n <=> NULL"), "T");
  CHECK_EQ(f.t("n <=> 1"), "F");
  CHECK_EQ(f.t("NULL <=> n"), "T");
  CHECK_EQ(f.t("n = NULL"), "N");
  CHECK_EQ(f.t("prio = 5.0"), "T");
  CHECK_EQ(f.t("prio < 5.5"), "T");
  CHECK_EQ(f.t("prio BETWEEN 1 AND 5"), "T");
  CHECK_EQ(f.t("prio BETWEEN 6 AND 9"), "F");
  CHECK_EQ(f.t("prio NOT BETWEEN 6 AND 9"), "T");
  CHECK_EQ(f.t("prio BETWEEN n AND 9"), "N");
  CHECK_EQ(f.t("prio BETWEEN n AND 4"), "F");     // FALSE AND NULL is FALSE
  CHECK_EQ(f.t("prio IN (1, 5, 9)"), "T");
  CHECK_EQ(f.t("prio IN (1, 2)"), "F");
  CHECK_EQ(f.t("prio NOT IN (1, 2)"), "T");
  CHECK_EQ(f.t("prio IN (1, NULL)"), "N");
  CHECK_EQ(f.t("prio IN (5, NULL)"), "T");
  CHECK_EQ(f.t("prio NOT IN (1, NULL)"), "N");
  CHECK_EQ(f.t("n IN (1, 2)"), "N");
  CHECK_EQ(f.t("prio IN (4.5, 5)"), "T");
  CHECK_EQ(f.t("u64 IN (18446744073709551614)"), "T");
  CHECK_EQ(f.t("prio IN (prio + 1, prio)"), "T");
}

TEST(is_tests) {
  Fixture f;
  CHECK_EQ(f.t("n IS NULL"), "T");
  CHECK_EQ(f.t("n IS NOT NULL"), "F");
  CHECK_EQ(f.t("prio IS NOT NULL"), "T");
  CHECK_EQ(f.t("n IS UNKNOWN"), "T");
  CHECK_EQ(f.t("prio IS TRUE"), "T");
  CHECK_EQ(f.t("0 IS FALSE"), "T");
  CHECK_EQ(f.t("n IS TRUE"), "F");
  CHECK_EQ(f.t("n IS NOT TRUE"), "T");
  CHECK_EQ(f.t("n IS FALSE"), "F");
  CHECK_EQ(f.t("n IS NOT FALSE"), "T");
  CHECK_EQ(f.t("(prio > 9) IS FALSE"), "T");
  CHECK_EQ(f.t("TRUE = 1 AND FALSE = 0"), "T");
}

TEST(three_valued_logic) {
  Fixture f;
  CHECK_EQ(f.t("n > 1 AND prio = 5"), "N");
  CHECK_EQ(f.t("n > 1 AND prio = 4"), "F");
  CHECK_EQ(f.t("n > 1 OR prio = 5"), "T");
  CHECK_EQ(f.t("n > 1 OR prio = 4"), "N");
  CHECK_EQ(f.t("NOT (n > 1)"), "N");
  CHECK_EQ(f.t("!(n > 1)"), "N");
  CHECK_EQ(f.t("n > 1 XOR TRUE"), "N");
  CHECK_EQ(f.t("TRUE XOR FALSE"), "T");
  CHECK_EQ(f.t("TRUE XOR TRUE"), "F");
  CHECK_EQ(f.t("prio && 1 || 0"), "T");
  CHECK_EQ(f.t("n + 1"), "N");
  CHECK_EQ(f.t("-n"), "N");
  CHECK_EQ(f.t("NULL"), "N");
  CHECK_EQ(f.t("NULL + 1 IS NULL"), "T");
  CHECK_EQ(f.t("0.0"), "F");
  CHECK_EQ(f.t("0.5"), "T");
  // A row matches only when the condition is TRUE.
  auto unknown = compile_ok("n > 1 OR prio = 4", f.s);
  REQUIRE(unknown);
  CHECK(!unknown->matches(f.row));
  auto negated = compile_ok("NOT (n > 1 OR prio = 4)", f.s);
  REQUIRE(negated);
  CHECK(!negated->matches(f.row));
}

TEST(precedence_follows_mysql) {
  Fixture f;
  CHECK_EQ(f.t("1 + 2 * 3 = 7"), "T");
  CHECK_EQ(f.t("(1 + 2) * 3 = 9"), "T");
  CHECK_EQ(f.t("2 * 3 ^ 1 = 4"), "T");            // ^ binds tighter than *
  CHECK_EQ(f.t("-2 ^ 1 = 18446744073709551615"), "T");  // (-2) ^ 1, not -(2 ^ 1)
  CHECK_EQ(f.t("1 + 1 << 2 = 8"), "T");           // + tighter than <<
  CHECK_EQ(f.t("1 << 2 & 12 = 4"), "T");          // << tighter than &
  CHECK_EQ(f.t("6 & 3 | 8 = 10"), "T");           // & tighter than |
  CHECK_EQ(f.t("1 | 2 = 3"), "T");                // | tighter than =
  CHECK_EQ(f.t("10 - 2 - 3 = 5"), "T");           // left associative
  CHECK_EQ(f.t("100 DIV 10 DIV 5 = 2"), "T");
  CHECK_EQ(f.t("1 OR 0 AND 0"), "T");             // AND tighter than OR
  CHECK_EQ(f.t("1 XOR 1 OR 1"), "T");             // XOR tighter than OR
  CHECK_EQ(f.t("0 AND 1 XOR 1"), "T");            // AND tighter than XOR: 0 XOR 1
  CHECK_EQ(f.t("NOT 0 AND 0"), "F");              // NOT tighter than AND
  CHECK_EQ(f.t("NOT prio = 4"), "T");             // NOT weaker than =: NOT (prio = 4)
  CHECK_EQ(f.t("! prio = 1"), "F");               // ! is strong: (!prio) = 1
  CHECK_EQ(f.t("NOT n IS NULL"), "F");            // NOT (n IS NULL)
  CHECK_EQ(f.t("prio = 5 IS TRUE"), "T");         // (prio = 5) IS TRUE
  CHECK_EQ(f.t("prio = 4 = 0"), "T");             // (prio = 4) = 0
  CHECK_EQ(f.t("1 = prio BETWEEN 1 AND 9"), "T"); // 1 = (prio BETWEEN 1 AND 9)
  CHECK_EQ(f.t("prio BETWEEN 1 AND 9 AND n IS NULL"), "T");
  CHECK_EQ(f.t("prio + 1 IN (6)"), "T");
  CHECK_EQ(f.t("- - 5 = 5"), "T");
  CHECK_EQ(f.t("~ ~ 5 = 5"), "T");
  CHECK_EQ(f.t("NOT NOT 1"), "T");
  CHECK_EQ(f.t("+5 = 5"), "T");
}

TEST(literals) {
  Fixture f;
  CHECK_EQ(f.t("0x10 = 16 AND 0XfF = 255"), "T");
  CHECK_EQ(f.t("18446744073709551615 = ~0"), "T");
  CHECK_EQ(f.t("1e3 = 1000 AND .5 = 0.5 AND 2.5e-1 = 0.25"), "T");
  CHECK_EQ(f.t("-9223372036854775808 < 0"), "T");
}

TEST(counters_and_sharing_between_threads) {
  Fixture f;
  uint64_t compiles = q4m::global_stats().cond_compiles.get();
  auto filter = compile_ok("prio = 5 AND u64 > 9223372036854775807 AND n IS NULL", f.s);
  REQUIRE(filter);
  CHECK_EQ(q4m::global_stats().cond_compiles.get(), compiles + 1);
  std::string other = payload(f.s, {int_bytes(0, 1), uint_bytes(0, 1), int_bytes(0, 2), uint_bytes(0, 2),
                                    int_bytes(0, 3), uint_bytes(0, 3), int_bytes(0, 4), uint_bytes(0, 4),
                                    int_bytes(0, 8), uint_bytes(1, 8), int_bytes(1, 4), int_bytes(5, 4)});
  uint64_t evals = q4m::global_stats().cond_evals.get();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; t++)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; i++)
        if (!filter->matches(f.row) || filter->matches(other)) wrong++;
    });
  for (auto& th : threads) th.join();
  CHECK_EQ(wrong.load(), 0);
  CHECK(q4m::global_stats().cond_evals.get() >= evals + 80000);
}

TEST(malformed_payload_never_matches) {
  Fixture f;
  auto filter = compile_ok("prio = 5 OR n IS NULL OR TRUE", f.s);
  REQUIRE(filter);
  CHECK(filter->matches(f.row));
  CHECK(!filter->matches(""));
  CHECK(!filter->matches(f.row.substr(0, f.row.size() - 2)));
  // A column whose length does not fit its kind (9 bytes for an integer).
  std::string bad = payload(f.s, {std::string(9, 'x'), uint_bytes(0, 1), int_bytes(0, 2), uint_bytes(0, 2),
                                  int_bytes(0, 3), uint_bytes(0, 3), int_bytes(0, 4), uint_bytes(0, 4),
                                  int_bytes(0, 8), uint_bytes(1, 8), std::nullopt, int_bytes(5, 4)});
  auto first = compile_ok("i8 = 0 OR TRUE", f.s);
  REQUIRE(first);
  CHECK(!first->matches(bad));
}

TEST(constant_conditions) {
  Fixture f;
  auto yes = compile_ok("1 + 1 = 2", f.s);
  auto no = compile_ok("1 = 2 OR NULL", f.s);
  REQUIRE(yes);
  REQUIRE(no);
  CHECK(yes->matches(f.row));
  CHECK(!no->matches(f.row));
}

TEST(many_referenced_columns_use_the_wide_path) {
  SchemaBuilder b;
  std::vector<std::optional<std::string>> values;
  std::string expr = "TRUE";
  for (int i = 0; i < 40; i++) {
    b.col("c" + std::to_string(i), ColumnKind::kInt, 2);
    values.push_back(i % 7 == 3 ? std::nullopt : std::optional<std::string>(int_bytes(i, 2)));
    expr += i % 7 == 3 ? " AND c" + std::to_string(i) + " IS NULL" : " AND c" + std::to_string(i) + " = " + std::to_string(i);
  }
  TableSchema s = b.build();
  auto f = compile_ok(expr, s);
  REQUIRE(f);
  CHECK(f->matches(payload(s, values)));
  values[39] = int_bytes(0, 2);
  CHECK(!f->matches(payload(s, values)));
}

TEST(filter_outlives_its_schema) {
  std::shared_ptr<const q4m::RowFilter> f;
  std::string row;
  {
    TableSchema s = int_schema();
    row = int_row(s);
    f = compile_ok("prio = 5 AND n IS NULL AND i8 = -100", s);
  }
  REQUIRE(f);
  CHECK(f->matches(row));
}
