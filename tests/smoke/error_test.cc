// ktune::Error and the stable names of its kinds.
#include <gtest/gtest.h>

#include "support/error.h"

namespace {

using ktune::ErrorKind;

TEST(Error, KindNamesRoundTrip) {
  for (ErrorKind kind : {ErrorKind::kInvalidArgument, ErrorKind::kInstantiation, ErrorKind::kBuild,
                         ErrorKind::kBuildTimeout, ErrorKind::kRun, ErrorKind::kRunTimeout,
                         ErrorKind::kWrongAnswer, ErrorKind::kWorkerLost, ErrorKind::kUnknown}) {
    EXPECT_EQ(ktune::error_kind_from_string(ktune::to_string(kind)), kind);
  }
  EXPECT_EQ(ktune::to_string(ErrorKind::kWrongAnswer), "wrong_answer");
  EXPECT_EQ(ktune::to_string(ErrorKind::kRunTimeout), "run_timeout");
}

TEST(Error, UnknownKindNameIsInvalidArgument) {
  try {
    ktune::error_kind_from_string("exploded");
    FAIL() << "no exception";
  } catch (const ktune::Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("exploded"), std::string::npos);
  }
}

}  // namespace
