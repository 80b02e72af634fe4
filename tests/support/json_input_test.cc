// Tests of parse_json_input and its users: a nesting limit instead of a stack overflow, and errors
// that quote at most 80 characters of the input.
#include "support/json_input.h"

#include <gtest/gtest.h>

#include <string>

#include "schedule_space/config.h"
#include "support/error.h"
#include "tuning_db/record.h"

namespace ktune {
namespace {

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The Error a call throws; fails the test when it throws nothing.
template <class Call>
Error error_of(Call&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error(ErrorKind::kInternal, "");
}

TEST(JsonInput, NestingUpToTheLimitParsesAndDeeperIsRefusedWithoutRecursing) {
  EXPECT_EQ(parse_json_input(nested(kMaxJsonDepth), "doc").dump(), nested(kMaxJsonDepth));
  const Error deeper = error_of([] { parse_json_input(nested(kMaxJsonDepth + 1), "doc"); });
  EXPECT_EQ(deeper.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(std::string(deeper.what()), "doc JSON nested deeper than 64 levels");
  // 100,000 levels: the parser would overflow the stack; the scan refuses them first.
  const Error huge = error_of([] { parse_json_input(std::string(100000, '['), "doc"); });
  EXPECT_EQ(std::string(huge.what()), "doc JSON nested deeper than 64 levels");
  // Brackets inside strings (escaped quotes too) are not nesting.
  const std::string text =
      "{\"a\": \"" + std::string(200, '[') + "\\\"" + std::string(200, '{') + "\"}";
  EXPECT_EQ(parse_json_input(text, "doc")["a"].get<std::string>().size(), 401u);
}

TEST(JsonInput, MalformedInputIsQuotedAtMostEightyCharacters) {
  const std::string text = "{\"key\": " + std::string(20000, '7') + " oops}";
  const Error e = error_of([&] { parse_json_input(text, "config"); });
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  const std::string message = e.what();
  EXPECT_EQ(message.rfind("malformed config JSON (", 0), 0u) << message;
  EXPECT_NE(message.find("'" + text.substr(0, 80) + "...'"), std::string::npos) << message;
  EXPECT_LT(message.size(), 400u) << message;
  EXPECT_EQ(quote_input("a\nb"), "a b");
  // Found by scripts/hostile: a binary import line put form feeds and escapes in the message.
  EXPECT_EQ(quote_input("a\x0b\x0c\x1b[31mb\x7f\r"), "a   [31mb  ");
}

TEST(JsonInput, ConfigsAndRecordLinesUseTheLimit) {
  const Error config =
      error_of([] { schedule_space::Config::from_json_string(std::string(100000, '[')); });
  EXPECT_EQ(config.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(std::string(config.what()), "config JSON nested deeper than 64 levels");
  const Error record =
      error_of([] { tuning_db::from_json_line("{\"input\": " + nested(20000) + "}"); });
  EXPECT_EQ(record.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(std::string(record.what()), "record JSON nested deeper than 64 levels");
}

}  // namespace
}  // namespace ktune
