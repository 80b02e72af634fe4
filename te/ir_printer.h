// Defines the C-like printer of te's IR (expressions, statements, lowered functions).
#pragma once

#include <ostream>
#include <string>

#include "te/ir.h"

namespace ktune::te {

// The text of e, e.g. "A[((i*16) + k)]", "ramp(x, 1, 8)", "select((i < 3), a, b)".
std::string to_string(const Expr& e);
// The text of s, indented by two spaces per level, one statement per line, ending in '\n'.
std::string to_string(const Stmt& s);
// "void name(float32* A, float32* B, float32* C /*out*/) {\n<body>}\n".
std::string to_string(const LoweredFunc& f);

std::ostream& operator<<(std::ostream& os, const Expr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);
std::ostream& operator<<(std::ostream& os, const LoweredFunc& f);

}  // namespace ktune::te
