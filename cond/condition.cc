#include "cond/condition.h"

#include <string>
#include <utility>

#include "core/util/stats.h"
#include "cond/compiled_filter.h"
#include "cond/compiler.h"
#include "cond/parser.h"

namespace q4m::cond {
namespace {

// Longer conditions are refused outright; far beyond any sensible subscription.
constexpr size_t kMaxConditionBytes = 16384;
// Error messages quote at most this much of the condition.
constexpr size_t kMaxQuotedBytes = 200;

bool utf8_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// 1-based position in characters (UTF-8), as a user counts them.
size_t char_position(std::string_view expr, size_t byte_offset) {
  size_t chars = 0;
  for (size_t i = 0; i < byte_offset && i < expr.size(); i++)
    if (!utf8_continuation(expr[i])) chars++;
  return chars + 1 + (byte_offset > expr.size() ? byte_offset - expr.size() : 0);
}

std::string quoted(std::string_view expr) {
  if (expr.size() <= kMaxQuotedBytes) return std::string(expr);
  size_t cut = kMaxQuotedBytes;
  while (cut > 0 && utf8_continuation(expr[cut])) cut--;
  return std::string(expr.substr(0, cut)) + "...";
}

Status invalid(std::string_view expr, const TableSchema& schema, const CondError& err) {
  std::string msg = "condition '" + quoted(expr) + "' on table " + schema.table_name + ": ";
  const std::string pos = "at position " + std::to_string(char_position(expr, err.offset));
  if (err.syntax) msg += "syntax error " + pos + ": " + err.what;
  else msg += err.what + " " + pos;
  return Status(ErrorCode::kInvalid, std::move(msg));
}

}  // namespace

Status compile(std::string_view expr, const TableSchema& schema, std::shared_ptr<const RowFilter>* out,
               std::vector<std::string>* columns) {
  global_stats().cond_compiles.add();
  CondError err;
  if (expr.size() > kMaxConditionBytes) {
    err.offset = kMaxConditionBytes;
    err.what = "condition is longer than " + std::to_string(kMaxConditionBytes) + " bytes";
    return invalid(expr, schema, err);
  }
  std::unique_ptr<Ast> ast = parse(expr, &err);
  if (!ast) return invalid(expr, schema, err);
  if (columns) *columns = named_columns(*ast, schema);
  Program program;
  if (!compile_ast(*ast, schema, &program, &err)) return invalid(expr, schema, err);
  *out = std::make_shared<CompiledFilter>(std::move(program));
  return Status::Ok();
}

}  // namespace q4m::cond
