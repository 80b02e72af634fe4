// Defines parse_json_input: JSON from a user or a peer, parsed with a nesting limit and errors that
// quote at most 80 characters.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ktune {

// Deeper than this, a document is refused before it is parsed (the parser recurses per level).
inline constexpr int kMaxJsonDepth = 64;

// Returns the text as a quotation for an error message: its first 80 characters, then "..." when
// there is more, with line breaks and other control characters shown as spaces.
std::string quote_input(std::string_view text);

// Parses `text`. Throws Error(kInvalidArgument) "<what> JSON nested deeper than 64 levels" or
// "malformed <what> JSON (<reason>): '<first 80 characters>...'", never a crash or a message
// that repeats the whole input.
nlohmann::json parse_json_input(std::string_view text, std::string_view what);

}  // namespace ktune
