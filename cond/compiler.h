// Types a parsed condition against a table schema and lowers it to a Program:
// resolves column names, applies the comparison rules (numbers with numbers,
// strings with strings, date/time literals converted for temporal columns),
// folds constant sub-expressions and plans the payload walk.
#pragma once
#include <string>
#include <vector>

#include "core/row/payload.h"
#include "cond/ast.h"
#include "cond/cond_error.h"
#include "cond/program.h"

namespace q4m::cond {

// Returns false with `err` filled if the condition is ill-typed for `schema`.
bool compile_ast(const Ast& root, const TableSchema& schema, Program* out, CondError* err);

// The columns of `schema` that the condition names (as declared, in table order; names not
// in the schema are left out), whether or not it is well-typed.
std::vector<std::string> named_columns(const Ast& root, const TableSchema& schema);

}  // namespace q4m::cond
