// Tests `ktune report` end to end: a log with known records becomes one self-contained HTML page
// that headless Chromium renders with its plots and numbers; bad input gives one line, exit 1 and
// no page.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "tests/cli_util.h"
#include "tests/process_util.h"
#include "tests/tools/png_pixels.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/report.h"
#include "tuning_db/run_store.h"

namespace ktune {
namespace {

using testing_cli::ktune;
using testing_cli::quote;
using testing_cli::shell;
using tuning_db::testing::make_failure;
using tuning_db::testing::make_record;
using tuning_db::testing::TempDir;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

tuning_db::Record tuned(tuning_db::Record r, const std::string& tuner) {
  r.tuner = tuner;
  return r;
}

// A layer named as torch.onnx nests its modules.
constexpr const char* kConvLayer =
    "/backbone/backbone.features/features.12/block/block.2/block.2.0/Conv";

// matmul 100 (2e6 FLOP): random reaches 20 GFLOP/s, xgb 40 (the best: "40.0 GFLOP/s") and has a
// build error; an xgb run with three plans; a model run whose layer is 1.25x the library.
void write_log(const std::string& path) {
  auto db = tuning_db::Database::open(path);
  db.add({tuned(make_record(100, 1, {2e-4}), "random"),
          tuned(make_record(100, 2, {1e-4}), "random"),
          tuned(make_record(100, 3, {1.5e-4}), "random")});
  db.add({tuned(make_record(100, 4, {1e-4}), "xgb"),
          tuned(make_failure(100, 5, ErrorKind::kBuild), "xgb"),
          tuned(make_record(100, 6, {5e-5}), "xgb"), tuned(make_record(100, 7, {6e-5}), "xgb")});
  const int64_t run = tuning_db::RunStore(db).begin(
      {"xgb", tuning_db::testing::matmul_key(100), tuning_db::testing::kHost.target, {}});
  tuning_db::RunStore(db).add_batch_quality(run, {0, 4, 0.2});
  tuning_db::RunStore(db).add_batch_quality(run, {1, 8, 0.6});
  tuning_db::RunStore(db).add_batch_quality(run, {2, 12, 0.9});
  tuning_db::RunStore(db).finish(run);
  tuning_db::record_model_run(db, "tiny.onnx", tuning_db::testing::kHost.target,
                              {{"trials", 7},
                               {"tuned_s", 0.001},
                               {"fallback_s", 0.004},
                               {"estimated_s", 0.00105},
                               {"built_model", {{"measured_s", 0.0011}}},
                               {"tasks",
                                {{{"key", "matmul-layer"},
                                  {"tuned_as", tuning_db::testing::matmul_key(100)},
                                  {"layers", {"fc_1"}},
                                  {"count", 1},
                                  {"trials", 7},
                                  {"best_s", 0.001},
                                  {"fallback_s", 0.004},
                                  {"runs_in_model", true},
                                  {"share", 1.0},
                                  {"library", "openblas"},
                                  {"library_s", 0.0008},
                                  {"library_spread", 0.03},
                                  {"ratio", 1.25}},
                                 // Another algorithm for it that got no trial: no share, no bar.
                                 {{"key", "other-algorithm"},
                                  {"tuned_as", "other-algorithm"},
                                  {"alternative_of", "matmul-layer"},
                                  {"layers", {"fc_1"}},
                                  {"count", 1},
                                  {"trials", 0},
                                  {"best_s", 0.003},
                                  {"fallback_s", 0.003},
                                  {"runs_in_model", false},
                                  {"share", nullptr}}}}});
  // The same model tuned further: its estimate over time has two points. Its conv ships its other
  // algorithm, whose own fallback (9 ms) is not the layer's (4 ms, the conv's).
  tuning_db::record_model_run(db, "tiny.onnx", tuning_db::testing::kHost.target,
                              {{"trials", 7},
                               {"tuned_s", 0.0009},
                               {"tasks",
                                {{{"key", "conv-layer"},
                                  {"tuned_as", "conv-layer"},
                                  {"layers", {kConvLayer}},
                                  {"count", 1},
                                  {"trials", 3},
                                  {"best_s", 0.002},
                                  {"fallback_s", 0.004},
                                  {"runs_in_model", false},
                                  {"share", nullptr}},
                                 {{"key", "conv-winograd"},
                                  {"tuned_as", "conv-winograd"},
                                  {"alternative_of", "conv-layer"},
                                  {"layers", {kConvLayer}},
                                  {"count", 1},
                                  {"trials", 4},
                                  {"best_s", 0.0009},
                                  {"fallback_s", 0.009},
                                  {"runs_in_model", true},
                                  {"share", 1.0}}}}});
  // A run whose sums rest on a noisy best, and whose second library race was noisy: no speed-up
  // over the fallbacks is quoted, and the tuned/library ratio says on how many races it rests.
  auto raced = [](const char* key, double best_s, bool noisy) {
    return nlohmann::json{{"key", key},          {"tuned_as", key},       {"layers", {key}},
                          {"count", 1},          {"trials", 2},           {"best_s", best_s},
                          {"fallback_s", 0.002}, {"runs_in_model", true}, {"share", 0.5},
                          {"library", "onednn"}, {"library_s", 0.001},    {"noisy", noisy},
                          {"best_noisy", !noisy}};
  };
  tuning_db::record_model_run(
      db, "noisy.onnx", tuning_db::testing::kHost.target,
      {{"trials", 4},
       {"tuned_s", 0.002},
       {"fallback_s", 0.004},
       {"noisy_in_sums", 1},
       {"library_s", 0.001},
       {"tuned_s_where_library", 0.0012},
       {"tasks", {raced("conv_a", 0.0012, false), raced("conv_b", 0.0008, true)}}});
}

// Headless Chromium on a page: its DOM (dump), or a screenshot into `png`. Returns what it printed.
testing_cli::Output chromium(const TempDir& dir, const std::string& args) {
  return shell("timeout 120 chromium --headless --no-sandbox --disable-gpu --user-data-dir=" +
               quote(dir.file("chromium-profile")) + " " + args);
}

size_t pixels_of(const testing_png::Image& img, uint32_t colour) {
  size_t n = 0;
  for (uint32_t y = 0; y < img.height; ++y)
    for (uint32_t x = 0; x < img.width; ++x) n += img.at(x, y) == colour;
  return n;
}

TEST(ReportCli, PageRendersPlotsAndNumbersInChromium) {
  ASSERT_EQ(shell("command -v chromium").status, 0)
      << "chromium is missing: scripts/setup installs it";
  TempDir dir;
  const std::string log = dir.file("log.db"), page = dir.file("report.html");
  write_log(log);
  const auto run = ktune("report --db " + quote(log) + " -o " + quote(page), true);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string html = read(page);
  // Self-contained: nothing fetched, nothing run.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);

  const auto dom = chromium(dir, "--dump-dom " + quote("file://" + page));
  ASSERT_EQ(dom.status, 0) << dom.err;
  // Two tuner curves and one correlation line: paths with at least two points each.
  const std::regex path_re("<path d=\"(M[^\"]+)\"");
  size_t drawn = 0;
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), path_re);
       it != std::sregex_iterator(); ++it) {
    const std::string d = (*it)[1].str();  // one string: begin and end of the same one
    drawn += std::count_if(d.begin(), d.end(), [](char c) { return c == 'V' || c == 'L'; }) >= 1;
  }
  EXPECT_GE(drawn, 3u) << dom.out.substr(0, 2000);
  EXPECT_NE(dom.out.find("40.0 GFLOP/s"), std::string::npos);  // the best of matmul 100
  EXPECT_NE(dom.out.find("(0.05 ms)"), std::string::npos);     // its cost
  EXPECT_NE(dom.out.find(">20.0<"), std::string::npos);        // random's best
  EXPECT_NE(dom.out.find(">0.900<"), std::string::npos);       // the last plan's correlation
  EXPECT_NE(dom.out.find(">1.25<"), std::string::npos);        // the layer against its library
  EXPECT_NE(dom.out.find(">0.8 ±3%<"), std::string::npos);     // the library's median and spread
  // The card is led by the built model's measured latency; a run not built says so.
  EXPECT_NE(dom.out.find("<b>built model 1.1 ms measured end to end</b> · tuned tasks 4.00x "
                         "faster than their untuned fallbacks (1 against 4 ms)"),
            std::string::npos);
  EXPECT_NE(dom.out.find("estimated 0.9 ms (sum of count x best; not built in this run)"),
            std::string::npos);
  EXPECT_NE(dom.out.find("no speed-up over the untuned fallbacks quoted: the timings of 1 row(s) "
                         "behind the sums spread more than 25%"),
            std::string::npos);
  // Its noisy best is marked in its row, as the model table under tune-model marks it.
  EXPECT_NE(dom.out.find("~</td>"), std::string::npos);
  EXPECT_NE(dom.out.find("class=\"meta noisy-legend\">~: the timings behind that figure spread "
                         "more than 25%"),
            std::string::npos);
  // The card whose conv ships its other algorithm says which fallback the chart and the sum take;
  // the first card's unshipped alternative needs no such line.
  const std::string fallback_legend =
      "class=\"meta fallback-legend\">fallback ms: each row's own untuned config; where another "
      "algorithm ships (e.g. Winograd), the chart's fallback bar and the untuned sum take the "
      "layer's first algorithm's";
  const size_t legend = dom.out.find(fallback_legend);
  EXPECT_NE(legend, std::string::npos);
  EXPECT_EQ(dom.out.find(fallback_legend, legend + 1), std::string::npos);
  EXPECT_NE(dom.out.find("tuned/library 1.20 on the same operators (1 of 2 races; the noisy "
                         "ones left out)"),
            std::string::npos);
  EXPECT_EQ(dom.out.find("2.00x faster"), std::string::npos);
  // Each task's tuning curve in its row: the log's curves of its workload, one per tuner.
  EXPECT_NE(dom.out.find("class=\"spark\"><title>fc_1: best GFLOP/s against trials: random 20.0 "
                         "after 3, xgb 40.0 after 4</title><path d=\"M"),
            std::string::npos)
      << dom.out.substr(0, 4000);
  EXPECT_NE(dom.out.find("<td class=\"spark\">-</td>"), std::string::npos);  // no records
  EXPECT_NE(dom.out.find(">build<"), std::string::npos);                     // the error, by kind
  // The layers by their ONNX nodes, which one ships, which got no trial, shares adding up.
  EXPECT_NE(dom.out.find(">fc_1<"), std::string::npos);
  EXPECT_NE(dom.out.find(">fc_1 (other algorithm for #1)<"), std::string::npos);
  EXPECT_EQ(dom.out.find("matmul-layer as "), std::string::npos);
  EXPECT_NE(dom.out.find(">yes<"), std::string::npos);
  EXPECT_NE(dom.out.find(">no<"), std::string::npos);
  EXPECT_NE(dom.out.find("1 of 2 tasks got no trial in this run"), std::string::npos);
  EXPECT_NE(dom.out.find(">100%<"), std::string::npos);
  EXPECT_NE(
      dom.out.find(
          "<th>cost models saved</th><th>tuning runs (one per workload tuned, one per model)</th>"),
      std::string::npos);
  // The per-layer bars: tuned, library and fallback of the layer that ships (1, 0.8 and 4 ms).
  const std::regex bar_re("<rect class=\"bar\"[^>]*><title>fc_1: (\\w+) ([0-9.]+)</title>");
  std::map<std::string, std::string> bars;
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), bar_re);
       it != std::sregex_iterator(); ++it)
    bars[(*it)[1].str()] = (*it)[2].str();
  EXPECT_EQ(bars, (std::map<std::string, std::string>{
                      {"tuned", "1"}, {"library", "0.8"}, {"fallback", "4"}}))
      << dom.out.substr(0, 4000);
  // A layer whose other algorithm ships: its bars are that algorithm's best and the layer's
  // fallback (the one the fallback sum counts), under the layer's name.
  // Its bar label drops the module names the next part repeats, and past 30 characters its middle
  // (the full name is the label's title).
  EXPECT_NE(
      dom.out.find(std::string("<title>") + kConvLayer + "</title>backbone.fea.../block.2.0/Conv<"),
      std::string::npos);
  const std::regex conv_re(
      "<rect class=\"bar\"[^>]*><title>backbone.features/features.12/block.2.0/Conv: (\\w+) "
      "([0-9.]+)</title>");
  std::map<std::string, std::string> conv_bars;
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), conv_re);
       it != std::sregex_iterator(); ++it)
    conv_bars[(*it)[1].str()] = (*it)[2].str();
  EXPECT_EQ(conv_bars, (std::map<std::string, std::string>{{"tuned", "0.9"}, {"fallback", "4"}}));
  // Their lengths are to scale: 1 : 0.8 : 4.
  const std::regex width_re(
      "<rect class=\"bar\"[^>]* width=\"([0-9.]+)\"[^>]*><title>fc_1: (\\w+)");
  std::map<std::string, double> widths;
  for (auto it = std::sregex_iterator(dom.out.begin(), dom.out.end(), width_re);
       it != std::sregex_iterator(); ++it)
    widths[(*it)[2].str()] = std::stod((*it)[1].str());
  ASSERT_EQ(widths.size(), 3u);
  EXPECT_NEAR(widths["fallback"] / widths["tuned"], 4, 0.02);
  EXPECT_NEAR(widths["library"] / widths["tuned"], 0.8, 0.02);
  // The model's estimate over its two runs: one line of two points (1 and 0.9 ms).
  const auto estimates = dom.out.find("Model estimates over time");
  ASSERT_NE(estimates, std::string::npos);
  EXPECT_NE(dom.out.find("<title>estimated</title>", estimates), std::string::npos);
  EXPECT_NE(dom.out.find("run of tiny.onnx", estimates), std::string::npos);

  // The screenshot shows both curves in their colours; an empty page shows none of them.
  const std::string shot = dir.file("report.png"), blank_page = dir.file("blank.html"),
                    blank = dir.file("blank.png");
  std::ofstream(blank_page) << "<!DOCTYPE html><html><body></body></html>";
  for (const auto& [from, to] : {std::pair{page, shot}, std::pair{blank_page, blank}}) {
    const auto s = chromium(
        dir, "--screenshot=" + quote(to) + " --window-size=1200,2000 " + quote("file://" + from));
    ASSERT_EQ(s.status, 0) << s.err;
  }
  const auto img = testing_png::decode_png(read(shot));
  const auto empty = testing_png::decode_png(read(blank));
  ASSERT_TRUE(img && empty);
  EXPECT_EQ(img->width, 1200u);
  EXPECT_GE(pixels_of(*img, 0x1f77b4), 50u);  // series 0 (random)
  EXPECT_GE(pixels_of(*img, 0xd62728), 50u);  // series 1 (xgb)
  EXPECT_EQ(pixels_of(*empty, 0x1f77b4), 0u);
  // The fallback's bar is drawn in the third colour (no curve uses it) at its length: the longest
  // run of that colour on a row is the bar's width.
  uint32_t longest = 0;
  for (uint32_t y = 0; y < img->height; ++y)
    for (uint32_t x = 0, run = 0; x < img->width; ++x) {
      run = img->at(x, y) == 0x2ca02c ? run + 1 : 0;
      longest = std::max(longest, run);
    }
  EXPECT_NEAR(longest, widths["fallback"], 2.0);
  EXPECT_GE(pixels_of(*img, 0x2ca02c), static_cast<size_t>(6 * widths["fallback"]));
  EXPECT_EQ(pixels_of(*empty, 0x2ca02c), 0u);
  std::set<uint32_t> colours, empty_colours;
  for (uint32_t y = 0; y < img->height; y += 3)
    for (uint32_t x = 0; x < img->width; x += 3) colours.insert(img->at(x, y));
  for (uint32_t y = 0; y < empty->height; y += 3)
    for (uint32_t x = 0; x < empty->width; x += 3) empty_colours.insert(empty->at(x, y));
  EXPECT_LE(empty_colours.size(), 2u);
  EXPECT_GE(colours.size(), 20u);
}

TEST(ReportCli, BadInputIsOneLineExitOneAndNoPage) {
  TempDir dir;
  const std::string page = dir.file("report.html");
  auto expect_refused = [&](const std::string& args, const std::string& says) {
    const auto r = ktune("report " + args, true);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  };
  expect_refused("--db " + quote(dir.file("missing.db")) + " -o " + quote(page), "no tuning log");
  EXPECT_FALSE(std::filesystem::exists(page));
  std::ofstream(dir.file("notes.txt")) << "not a database, just text\n";
  expect_refused("--db " + quote(dir.file("notes.txt")) + " -o " + quote(page), "notes.txt");
  EXPECT_FALSE(std::filesystem::exists(page));
  expect_refused("-o " + quote(page), "exactly one of --db and --server");

  // An unwritable page: a missing directory, or a directory in the way; an old page stays whole.
  const std::string log = dir.file("log.db");
  write_log(log);
  expect_refused("--db " + quote(log) + " -o " + quote(dir.file("no/such/dir/report.html")),
                 "cannot write");
  std::filesystem::create_directory(dir.file("taken"));
  expect_refused("--db " + quote(log) + " -o " + quote(dir.file("taken")), "cannot write");
  std::ofstream(page) << "old page";
  expect_refused("--db " + quote(dir.file("missing.db")) + " -o " + quote(page), "no tuning log");
  EXPECT_EQ(read(page), "old page");
  for (const auto& e : std::filesystem::directory_iterator(dir.file(".")))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

// --server: the server's log (records only) streamed into the report. A served log's records must
// instantiate here (the import checks them), so they are configs of the real matmul space.
TEST(ReportCli, ServerLogIsReported) {
  TempDir dir;
  const auto host = codegen::Target::host();
  const auto task = schedule_space::Task::create(
      "matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}},
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(),
                                         host.cores()));
  std::vector<tuning_db::Record> records;
  for (uint64_t i = 0, found = 0; i < task.space().size() && found < 3; ++i) {
    if (!task.space().is_valid(i)) continue;
    // 64^3 * 2 FLOP in 1e-5, 2e-5, 4e-5 s: 52.4, 26.2 and 13.1 GFLOP/s.
    tuning_db::Record r =
        make_record(64, static_cast<int64_t>(i), {1e-5 * static_cast<double>(1 << found++)},
                    {host.str(), codegen::llvm_version()});
    r.workload_key = task.workload_key();
    r.args = task.args_json();
    r.config = task.space().get(i).to_json();
    records.push_back(r);
  }
  ASSERT_EQ(records.size(), 3u);
  tuning_db::Database::open(dir.file("server.db")).add(records);

  testing_process::Child server(
      {KTUNE_BINARY, "server", "--port", "0", "--db", dir.file("server.db")},
      dir.file("server.out"), dir.file("server.err"));
  const std::string address = testing_process::wait_for_address(dir.file("server.out"));
  ASSERT_FALSE(address.empty()) << read(dir.file("server.err"));
  const std::string page = dir.file("report.html");
  const auto r = ktune("report --server " + address + " -o " + quote(page), true);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = read(page);
  EXPECT_NE(html.find("log server " + address), std::string::npos);
  EXPECT_NE(html.find("52.4 GFLOP/s"), std::string::npos);
  EXPECT_NE(html.find(">13.1<"), std::string::npos);  // the third config, among the top ones
  EXPECT_NE(html.find("<path d=\"M"), std::string::npos);
  // The export carries no cost models or runs: their counts are unknown, and the page says why.
  EXPECT_NE(html.find("<td>-</td><td>-</td></tr></table>"), std::string::npos) << html;
  EXPECT_NE(html.find("a server's log is exported as its records only"), std::string::npos);
}

}  // namespace
}  // namespace ktune
