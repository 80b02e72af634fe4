// Bounded JSON parsing of untrusted input.
#include "support/json_input.h"

#include "support/error.h"

namespace ktune {
namespace {

constexpr size_t kQuoted = 80;

// The deepest nesting of [ and { outside strings; stops counting past the limit.
int depth_of(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
    if (deepest > kMaxJsonDepth) break;
  }
  return deepest;
}

}  // namespace

std::string quote_input(std::string_view text) {
  std::string q(text.substr(0, kQuoted));
  // Control characters (line breaks, escapes, form feeds from a binary file) would break the one
  // line of an error message or drive the terminal: shown as spaces.
  for (char& c : q)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  if (text.size() > kQuoted) q += "...";
  return q;
}

nlohmann::json parse_json_input(std::string_view text, std::string_view what) {
  if (depth_of(text) > kMaxJsonDepth)
    throw Error(ErrorKind::kInvalidArgument, std::string(what) + " JSON nested deeper than " +
                                                 std::to_string(kMaxJsonDepth) + " levels");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's message quotes the text it read last: keep it short too.
    std::string reason = e.what();
    if (reason.size() > 200) reason = reason.substr(0, 200) + "...";
    throw Error(ErrorKind::kInvalidArgument, "malformed " + std::string(what) + " JSON (" + reason +
                                                 "): '" + quote_input(text) + "'");
  }
}

}  // namespace ktune
