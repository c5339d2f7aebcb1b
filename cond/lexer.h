// Splits a condition into tokens. Hand-written; never reads past the input.
#pragma once
#include <string_view>
#include <vector>

#include "cond/cond_error.h"
#include "cond/token.h"

namespace q4m::cond {

// Appends the tokens of `src` to `out`, ending with a kEnd token positioned at
// src.size(). Returns false (and fills `err`) on a lexical error.
bool tokenize(std::string_view src, std::vector<Token>* out, CondError* err);

}  // namespace q4m::cond
