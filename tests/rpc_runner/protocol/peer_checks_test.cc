// Tests the server's checks of what a worker sends, field by field: hello (key, target, cores,
// vector bits, slots, peak), results (costs, build and run times, error text and kind), the
// plausibility ceiling and clean_text.
#include "rpc_runner/protocol/peer_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace ktune::rpc_runner {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

rpc::WorkerHello good_hello() {
  rpc::WorkerHello h;
  h.set_key("x86-avx2");
  h.set_target("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3");
  h.set_cores(16);
  h.set_vector_bits(256);
  h.set_slots(4);
  h.set_peak_gflops(1000);
  h.set_description("a workstation");
  return h;
}

// The refusal of a hello changed by `edit` ("" = accepted).
template <class Edit>
std::string refusal_of(Edit edit) {
  rpc::WorkerHello h = good_hello();
  edit(h);
  return check_hello(h);
}

TEST(PeerChecks, AGoodHelloPasses) { EXPECT_EQ(check_hello(good_hello()), ""); }

TEST(PeerChecks, HelloKeyIsBoundedAndPrintable) {
  EXPECT_NE(refusal_of([](auto& h) { h.set_key(""); }), "");
  EXPECT_EQ(refusal_of([](auto& h) { h.set_key(std::string(kMaxKeyBytes, 'k')); }), "");
  const std::string huge = refusal_of([](auto& h) { h.set_key(std::string(1 << 20, 'k')); });
  EXPECT_NE(huge.find("device key"), std::string::npos) << huge;
  EXPECT_LT(huge.size(), 200u) << "the refusal does not repeat the key";
  EXPECT_NE(refusal_of([](auto& h) { h.set_key("cpu\n[fake log line]"); }), "");
  EXPECT_NE(refusal_of([](auto& h) { h.set_key(std::string("cpu\x1b[31m")); }), "");
}

TEST(PeerChecks, HelloTargetIsBoundedAndPrintable) {
  EXPECT_NE(refusal_of([](auto& h) { h.set_target(""); }), "");
  EXPECT_NE(refusal_of([](auto& h) {
              h.set_target(std::string(kMaxTargetBytes + 1, 't'));
            }).find("target"),
            std::string::npos);
  EXPECT_NE(refusal_of([](auto& h) { h.set_target("llvm\r-mcpu=x"); }), "");
}

TEST(PeerChecks, HelloCoresAreBounded) {
  EXPECT_EQ(refusal_of([](auto& h) { h.set_cores(0); }), "") << "0 = unknown";
  EXPECT_EQ(refusal_of([](auto& h) { h.set_cores(kMaxCores); }), "");
  EXPECT_NE(refusal_of([](auto& h) { h.set_cores(kMaxCores + 1); }).find("cores"),
            std::string::npos);
  EXPECT_NE(refusal_of([](auto& h) { h.set_cores(2147483647); }), "");
  EXPECT_NE(refusal_of([](auto& h) { h.set_cores(-1); }), "");
}

TEST(PeerChecks, HelloVectorBitsComeFromTheRealSet) {
  for (int bits : {0, 32, 128, 256, 512})
    EXPECT_EQ(refusal_of([&](auto& h) { h.set_vector_bits(bits); }), "") << bits;
  for (int bits : {-128, 1, 64, 100, 1024, 1 << 30})
    EXPECT_NE(refusal_of([&](auto& h) { h.set_vector_bits(bits); }).find("vector bits"),
              std::string::npos)
        << bits;
}

TEST(PeerChecks, HelloSlotsAndPeakAreBounded) {
  EXPECT_EQ(refusal_of([](auto& h) { h.set_slots(0); }), "");
  EXPECT_NE(refusal_of([](auto& h) { h.set_slots(kMaxSlots + 1); }), "");
  EXPECT_NE(refusal_of([](auto& h) { h.set_slots(-3); }), "");
  EXPECT_EQ(refusal_of([](auto& h) { h.set_peak_gflops(0); }), "");
  for (double peak : {kNaN, kInf, -1.0})
    EXPECT_NE(refusal_of([&](auto& h) { h.set_peak_gflops(peak); }), "") << peak;
}

TEST(PeerChecks, TheCeilingIsCoresTimesLanesTimesPortsTimesClock) {
  EXPECT_DOUBLE_EQ(peak_ceiling_gflops(1, 8), 8 * kFmaPortsCeiling * 2 * kClockGhzCeiling);
  EXPECT_DOUBLE_EQ(peak_ceiling_gflops(4, 16), 4 * peak_ceiling_gflops(1, 16));
  // Bounded inputs: a claimed core count beyond kMaxCores counts as kMaxCores.
  EXPECT_DOUBLE_EQ(peak_ceiling_gflops(2147483647, 8), peak_ceiling_gflops(kMaxCores, 8));
  EXPECT_DOUBLE_EQ(peak_ceiling_gflops(0, 0), peak_ceiling_gflops(1, 1));
}

// A calibration is held to the declared target (one core at most its physical ceiling) and the
// declared cores; an accepted one that runs like far fewer cores than declared is noted; results
// are then bounded by it, not by the declared cores.
TEST(PeerChecks, ACalibrationIsHeldToItsTargetAndCoresAndBoundsTheResults) {
  const double one_core = peak_ceiling_gflops(1, 16);
  EXPECT_EQ(check_calibration(230, 431, 2, 16), "");
  EXPECT_EQ(check_calibration(230, 2 * 230 * kCoresSlack, 2, 16), "");
  EXPECT_NE(check_calibration(one_core * 1.01, one_core, 1, 16)
                .find("above what a core of its "
                      "target can"),
            std::string::npos);
  EXPECT_NE(check_calibration(20, 2000, 1, 16).find("more than its 1 declared core(s)"),
            std::string::npos);
  for (double bad : {kNaN, kInf, 0.0, -5.0}) {
    EXPECT_NE(check_calibration(bad, 100, 2, 16), "") << bad;
    EXPECT_NE(check_calibration(100, bad, 2, 16), "") << bad;
  }
  // cores=1024 on a 2-core machine: accepted (its figures are consistent), noted.
  EXPECT_EQ(check_calibration(230, 440, 1024, 16), "");
  EXPECT_EQ(calibration_note(230, 440, 1024), "says 1024 cores; its calibration runs like 1.9");
  EXPECT_EQ(calibration_note(230, 440, 2), "");
  EXPECT_EQ(calibration_note(230, 230, 1), "");

  WorkerInfo w;
  w.cores = 1024;
  w.core_gflops = 230;
  w.all_gflops = 440;
  EXPECT_DOUBLE_EQ(calibrated_ceiling_gflops(w, 1, 1, 16), 230 * kCalibrationSlack);
  EXPECT_DOUBLE_EQ(calibrated_ceiling_gflops(w, 0, 1, 16), 440 * kCalibrationSlack);
  EXPECT_DOUBLE_EQ(calibrated_ceiling_gflops(w, 0, 4, 16), 4 * 440 * kCalibrationSlack);
  // The lie: 766,771 GFLOP/s on all "1024" cores is far above the calibrated ceiling,
  // where the declared one let it through.
  EXPECT_LT(calibrated_ceiling_gflops(w, 0, 1, 16), 766771.0);
  EXPECT_GT(peak_ceiling_gflops(1024, 16), 766771.0);
  // Not calibrated yet, or emulated: the declared ceiling.
  WorkerInfo pending;
  pending.cores = 4;
  EXPECT_DOUBLE_EQ(calibrated_ceiling_gflops(pending, 0, 1, 16), peak_ceiling_gflops(4, 16));
  EXPECT_DOUBLE_EQ(calibrated_ceiling_gflops(pending, 1, 1, 16), peak_ceiling_gflops(1, 16));
  WorkerInfo qemu = w;
  qemu.emulated = true;
  EXPECT_DOUBLE_EQ(calibrated_ceiling_gflops(qemu, 0, 1, 16), peak_ceiling_gflops(1024, 16));
}

TEST(PeerChecks, CleanTextReplacesControlsAndCutsOnACharacterBoundary) {
  EXPECT_EQ(clean_text("line 1\nline 2\t\x1b[0m", 100), "line 1 line 2  [0m");
  EXPECT_EQ(clean_text("short", 5), "short");
  EXPECT_EQ(clean_text("abcdefgh", 6), "abc...");
  // "é" is two bytes: a cut inside it backs up to its first byte.
  const std::string cut = clean_text("abcé" + std::string(10, 'x'), 7);
  EXPECT_EQ(cut, "abc...");
  EXPECT_EQ(clean_text(std::string(5 << 20, 'e'), kMaxErrorTextBytes).size(), kMaxErrorTextBytes);
}

// Limits of a candidate: 3 timings, 10 s build and run timeouts, 1e9 flop on a 100 GFLOP/s
// ceiling (no run faster than 0.01 s).
ResultLimits limits() {
  tuner::MeasureOptions m;
  m.repeat = 3;
  m.build_timeout_s = 10;
  m.run_timeout_s = 10;
  return result_limits(m, 1e9, 100);
}

rpc::CandidateResult ok_result(std::initializer_list<double> costs) {
  rpc::CandidateResult r;
  r.set_id(5);
  for (double c : costs) r.add_costs(c);
  r.set_build_s(0.5);
  r.set_run_s(0.2);
  return r;
}

TEST(PeerChecks, ResultLimitsComeFromTheCandidatesSettings) {
  const ResultLimits l = limits();
  EXPECT_EQ(l.max_costs, 3);
  EXPECT_DOUBLE_EQ(l.max_cost_s, 10);
  EXPECT_DOUBLE_EQ(l.min_cost_s, 0.01);
  EXPECT_DOUBLE_EQ(l.max_build_s, 10 + kTimeSlackS);
  EXPECT_DOUBLE_EQ(l.max_run_s, 10 + kTimeSlackS);
}

TEST(PeerChecks, APlausibleResultIsKept) {
  const CheckedResult c = check_result(ok_result({0.02, 0.021, 0.019}), limits());
  EXPECT_EQ(c.refusal, "");
  ASSERT_TRUE(c.result.ok());
  EXPECT_EQ(c.result.costs, (std::vector<double>{0.02, 0.021, 0.019}));
  EXPECT_DOUBLE_EQ(c.result.build_s, 0.5);
  EXPECT_DOUBLE_EQ(c.result.run_s, 0.2);
}

// The refusal of an ok result with these costs.
std::string cost_refusal(std::initializer_list<double> costs) {
  const CheckedResult c = check_result(ok_result(costs), limits());
  if (!c.refusal.empty()) {
    EXPECT_EQ(c.result.error, ErrorKind::kUnknown);
    EXPECT_TRUE(c.result.costs.empty());
    EXPECT_EQ(c.result.error_message, "refused: " + c.refusal);
  }
  return c.refusal;
}

TEST(PeerChecks, CostsMustBeFinitePositiveAndWithinTheTimeoutAndTheCeiling) {
  EXPECT_NE(cost_refusal({}).find("without costs"), std::string::npos);
  EXPECT_NE(cost_refusal({0.02, 0.02, 0.02, 0.02}).find("4 costs"), std::string::npos);
  EXPECT_NE(cost_refusal({kNaN}), "");
  EXPECT_NE(cost_refusal({0.02, kInf}), "");
  EXPECT_NE(cost_refusal({-0.02}), "");
  EXPECT_NE(cost_refusal({0}), "");
  EXPECT_NE(cost_refusal({1e308}).find("run timeout"), std::string::npos);
  EXPECT_NE(cost_refusal({0.02, 0.005}).find("ceiling"), std::string::npos) << "200 GFLOP/s";
  EXPECT_EQ(cost_refusal({0.01}), "") << "exactly at the ceiling";
}

// The refusal of an ok result with these build and run times.
std::string time_refusal(double build_s, double run_s) {
  rpc::CandidateResult r = ok_result({0.02});
  r.set_build_s(build_s);
  r.set_run_s(run_s);
  const CheckedResult c = check_result(r, limits());
  EXPECT_TRUE(std::isfinite(c.result.build_s) && c.result.build_s >= 0);
  EXPECT_TRUE(std::isfinite(c.result.run_s) && c.result.run_s >= 0);
  return c.refusal;
}

TEST(PeerChecks, BuildAndRunTimesMustBeFiniteAndInRange) {
  EXPECT_EQ(time_refusal(0, 0), "");
  EXPECT_EQ(time_refusal(10 + kTimeSlackS, 10 + kTimeSlackS), "");
  EXPECT_NE(time_refusal(kNaN, 0.1).find("build time"), std::string::npos);
  EXPECT_NE(time_refusal(-1, 0.1).find("build time"), std::string::npos);
  EXPECT_NE(time_refusal(1e9, 0.1).find("build time"), std::string::npos);
  EXPECT_NE(time_refusal(0.1, -1e308).find("run time"), std::string::npos);
  EXPECT_NE(time_refusal(0.1, kInf).find("run time"), std::string::npos);
  EXPECT_NE(time_refusal(0.1, 10 + kTimeSlackS + 1).find("run time"), std::string::npos);
}

TEST(PeerChecks, ErrorResultsAreCheckedToo) {
  rpc::CandidateResult r;
  r.set_error_kind("run");
  r.set_error_message(std::string(5 << 20, 'x') + "\n");
  r.set_build_s(0.1);
  CheckedResult c = check_result(r, limits());
  EXPECT_EQ(c.refusal, "");
  EXPECT_EQ(c.result.error, ErrorKind::kRun);
  EXPECT_EQ(c.result.error_message.size(), kMaxErrorTextBytes);
  // A kind that is no measurement's is read as unknown; its text kept (cleaned).
  r.set_error_kind("database");
  r.set_error_message("disk\nfull");
  c = check_result(r, limits());
  EXPECT_EQ(c.result.error, ErrorKind::kUnknown);
  EXPECT_EQ(c.result.error_message, "disk full");
  r.set_error_kind("no such kind");
  EXPECT_EQ(check_result(r, limits()).result.error, ErrorKind::kUnknown);
  // The kinds a record keeps pass as they are.
  for (const char* kind : {"instantiation", "build", "build_timeout", "run_timeout", "wrong_answer",
                           "worker_lost", "unsupported", "unknown"}) {
    r.set_error_kind(kind);
    EXPECT_EQ(to_string(*check_result(r, limits()).result.error), kind);
  }
  // An error result's times are checked like an ok one's.
  r.set_error_kind("run");
  r.set_build_s(kNaN);
  c = check_result(r, limits());
  EXPECT_NE(c.refusal.find("build time"), std::string::npos);
  EXPECT_EQ(c.result.build_s, 0);
}

}  // namespace
}  // namespace ktune::rpc_runner
