// Compile errors: exact message format, positions (1-based characters), limits.
#include "check.h"
#include "cond_test_util.h"

using namespace cond_test;

namespace {

TableSchema schema() {
  return SchemaBuilder("shop.orders")
      .col("prio", ColumnKind::kInt, 4)
      .col("in", ColumnKind::kInt, 4)
      .col("order id", ColumnKind::kInt, 4)
      .col("name", ColumnKind::kVarchar)
      .build();
}

std::string err(const std::string& e) { return error_of(e, schema()); }

bool contains(const std::string& haystack, const std::string& needle) {
  bool found = haystack.find(needle) != std::string::npos;
  if (!found) std::fprintf(stderr, "  '%s' does not contain '%s'\n", haystack.c_str(), needle.c_str());
  return found;
}

}  // namespace

TEST(message_format) {
  CHECK_EQ(err("prio >"),
           "condition 'prio >' on table shop.orders: syntax error at position 7: expected a column, a literal "
           "or '(', found end of condition");
  CHECK_EQ(err("prio > 1 and kind = 2"),
           "condition 'prio > 1 and kind = 2' on table shop.orders: unknown column 'kind' at position 14");
  CHECK_EQ(err("name = 3"),
           "condition 'name = 3' on table shop.orders: cannot compare a string with a number at position 6");
}

TEST(syntax_error_positions) {
  CHECK(contains(err(""), "syntax error at position 1: expected a column"));
  CHECK(contains(err("   "), "syntax error at position 4"));
  CHECK(contains(err("prio = 'abc"), "syntax error at position 8: unterminated string"));
  CHECK(contains(err("prio = \"abc\\\""), "syntax error at position 8: unterminated string"));
  CHECK(contains(err("`prio = 1"), "syntax error at position 1: unterminated `quoted name`"));
  CHECK(contains(err("prio = 1 2"), "syntax error at position 10: unexpected number 2, expected an operator"));
  CHECK(contains(err("prio = 1)"), "syntax error at position 9: unexpected ')'"));
  CHECK(contains(err("(prio = 1"), "syntax error at position 10: expected ')', found end of condition"));
  CHECK(contains(err("prio @ 1"), "syntax error at position 6: unexpected character '@'"));
  CHECK(contains(err("prio = \x01"), "syntax error at position 8: unexpected byte 0x01"));
  CHECK(contains(err("prio IN 1"), "syntax error at position 9: expected '(' after IN"));
  CHECK(contains(err("prio IN ()"), "syntax error at position 10: expected a column"));
  CHECK(contains(err("prio IN (1 2)"), "syntax error at position 12: expected ',' or ')' in the IN list"));
  CHECK(contains(err("prio BETWEEN 1 OR 2"), "syntax error at position 16: expected AND after BETWEEN"));
  CHECK(contains(err("prio IS 5"), "syntax error at position 9: expected NULL, TRUE, FALSE or UNKNOWN"));
  CHECK(contains(err("prio = NOT 1"), "syntax error at position 8: NOT cannot be used here"));
  CHECK(contains(err("prio NOT 1"), "syntax error at position 6: unexpected 'NOT'"));
  CHECK(contains(err("99999999999999999999 > prio"), "syntax error at position 1: integer 99999999999999999999 is out of range"));
  CHECK(contains(err("0x1ffffffffffffffff > prio"), "syntax error at position 1: hex literal is larger than 64 bits"));
  CHECK(contains(err("prio > 0x"), "syntax error at position 8: malformed number"));
  CHECK(contains(err("prio > 3abc"), "syntax error at position 8: malformed number"));
  CHECK(contains(err("prio > 1e999"), "syntax error at position 8: number '1e999' is out of range"));
  CHECK(contains(err("`` = 1"), "syntax error at position 1: empty column name"));
  CHECK(contains(err("prio = = 1"), "syntax error at position 8: expected a column, a literal or '(', found '='"));
}

TEST(positions_count_characters_not_bytes) {
  // 'é' is two bytes in UTF-8 but one character.
  CHECK(contains(err("name = 'é' AND zz = 1"), "unknown column 'zz' at position 16"));
  CHECK(contains(err("名前 = 1"), "unknown column '名前' at position 1"));
  CHECK(contains(err("name = 'ü' OR 1 +"), "syntax error at position 18"));
}

TEST(names_and_keywords) {
  CHECK_EQ(err("PRIO = 1 AND Prio = 1"), "ok");
  CHECK_EQ(err("`in` = 1 AND `order id` > 2"), "ok");
  CHECK(contains(err("in = 1"), "syntax error at position 1"));
  CHECK(contains(err("`prio` + `nope` > 1"), "unknown column 'nope' at position 10"));
  CHECK(contains(err("unknown = 1"), "syntax error at position 1"));  // UNKNOWN is a keyword
}

TEST(nesting_and_size_limits) {
  std::string deep;
  for (int i = 0; i < 40; i++) deep += "(";
  deep += "prio";
  for (int i = 0; i < 40; i++) deep += ")";
  CHECK(contains(err(deep), "condition is too deeply nested"));
  std::string ok_nesting = "((((((((((prio))))))))))";
  CHECK_EQ(err(ok_nesting + " = 1"), "ok");

  std::string nots;
  for (int i = 0; i < 40; i++) nots += "NOT ";
  CHECK(contains(err(nots + "prio"), "too deeply nested"));
  std::string minuses;
  for (int i = 0; i < 40; i++) minuses += "- ";
  CHECK(contains(err(minuses + "prio"), "too deeply nested"));

  // Left-associative chains deepen the tree without recursion; they are bounded too.
  std::string sum = "prio";
  for (int i = 0; i < 100; i++) sum += " + 1";
  CHECK(contains(err(sum + " > 0"), "too deeply nested"));
  // AND / OR chains are flat, so long ones are fine.
  std::string conj = "prio = 0";
  for (int i = 1; i < 500; i++) conj += (i % 2 ? " AND prio <> " : " OR prio = ") + std::to_string(i);
  CHECK_EQ(err(conj), "ok");
  std::string in_list = "prio IN (0";
  for (int i = 1; i < 1000; i++) in_list += ", " + std::to_string(i);
  CHECK_EQ(err(in_list + ")"), "ok");

  std::string huge = "prio = 1" + std::string(20000, ' ');
  std::string m = err(huge);
  CHECK(contains(m, "condition is longer than 16384 bytes at position 16385"));
  CHECK(contains(m, "...' on table shop.orders"));  // long conditions are quoted shortened
  CHECK(m.size() < 400);
}

TEST(failed_compile_leaves_output_alone) {
  std::shared_ptr<const q4m::RowFilter> f;
  CHECK(!q4m::cond::compile("prio >", schema(), &f).ok());
  CHECK(f == nullptr);
  CHECK(q4m::cond::compile("prio > 1", schema(), &f).ok());
  CHECK(f != nullptr);
}

TEST(inconsistent_schema_is_reported_not_crashed) {
  TableSchema s = schema();
  s.columns[0].null_byte = 7;  // outside the 1-byte null area
  CHECK(contains(error_of("prio = 1", s), "table schema is inconsistent"));
}

// The columns a condition names are what the caller checks privileges on: all of them, as
// declared and in table order, also when the condition then fails to compile (its error
// could tell an unreadable column's type), and never one that is not in the table.
TEST(compile_gives_the_columns_the_condition_names) {
  std::shared_ptr<const q4m::RowFilter> f;
  std::vector<std::string> columns;
  CHECK(q4m::cond::compile("NAME = 'x' OR prio > 1 AND prio * 0 = 0", schema(), &f, &columns).ok());
  CHECK(columns == (std::vector<std::string>{"prio", "name"}));
  CHECK(q4m::cond::compile("1 = 1", schema(), &f, &columns).ok());
  CHECK(columns.empty());
  CHECK(q4m::cond::compile("`order id` IN (1, 2) AND NOT `in` IS NULL", schema(), &f, &columns).ok());
  CHECK(columns == (std::vector<std::string>{"in", "order id"}));
  // Ill-typed, unknown column: the known ones are still given.
  CHECK(!q4m::cond::compile("name = 3", schema(), &f, &columns).ok());
  CHECK(columns == (std::vector<std::string>{"name"}));
  CHECK(!q4m::cond::compile("prio > 1 AND kind = 2", schema(), &f, &columns).ok());
  CHECK(columns == (std::vector<std::string>{"prio"}));
}
