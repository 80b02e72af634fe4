// Declares the validators of numeric command-line options: finite numbers within documented bounds.
#pragma once

#include <CLI/CLI.hpp>

namespace ktune::tools {

// Accepts a number in [lo, hi]; refuses words, NaN, infinities, and (for counts) the negative
// values that an unsigned option would otherwise wrap to 2^64 - 1. The message names the bounds.
CLI::Validator finite_in(double lo, double hi);

}  // namespace ktune::tools
