// End-to-end tests of the tuning server, a device worker and the remote runner, all in this
// process over 127.0.0.1 (the worker's kernels still run in a real ktune-runner child).
#include <chrono>
#include <future>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "codegen/target.h"
#include "rpc_runner/device_worker.h"
#include "rpc_runner/remote_runner.h"
#include "rpc_runner/tuning_server.h"
#include "schedule_space/task.h"
#include "tests/rpc_runner/fault_template.h"

namespace ktune::rpc_runner {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

schedule_space::Task task_for(const std::string& target, const std::string& name,
                              const std::map<std::string, std::string>& args) {
  codegen::Target t = codegen::Target::parse(target);
  return schedule_space::Task::create(
      name, args, schedule_space::make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores()));
}

DeviceWorkerOptions worker_options(const TuningServer& server, const std::string& key) {
  DeviceWorkerOptions o;
  o.server = server.address();
  o.key = key;
  o.runner_path = KTUNE_RUNNER_PATH;
  o.reconnect_initial_s = 0.1;
  return o;
}

RemoteRunnerOptions runner_options(const TuningServer& server, const std::string& key, double run_timeout_s) {
  RemoteRunnerOptions o;
  o.session.server = server.address();
  o.session.device_key = key;
  o.session.lease_timeout_s = 10;  // covers the worker's first attach
  o.build_threads = 2;
  o.measure.run_timeout_s = run_timeout_s;
  return o;
}

TuningServerOptions loopback() {
  TuningServerOptions o;
  o.port = 0;
  return o;
}

TEST(RemoteRunner, MeasuresMatmulOnTheWorkerAndSurvivesFaultyKernels) {
  TuningServer server(loopback());
  ASSERT_GT(server.port(), 0);
  DeviceWorker worker(worker_options(server, "cpu-test"));
  RemoteRunner runner(runner_options(server, "cpu-test", 1.5));
  const std::string device_target = runner.device().target;
  EXPECT_EQ(device_target, codegen::Target::host().str());
  EXPECT_EQ(runner.device().key, "cpu-test");

  // The registry shows the worker, leased by this session.
  auto devices = list_devices(server.address());
  ASSERT_EQ(devices.size(), 1u);
  EXPECT_EQ(devices[0].key, "cpu-test");
  EXPECT_EQ(devices[0].target, device_target);
  EXPECT_TRUE(devices[0].leased);

  auto task = task_for(device_target, "matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  std::mt19937_64 rng(3);
  std::vector<tuner::MeasureInput> inputs;
  for (uint64_t index : task.space().sample(8, rng)) inputs.push_back({&task, task.space().get(index)});
  auto results = runner.measure(inputs);
  ASSERT_EQ(results.size(), inputs.size());
  size_t ok = 0, ran = 0;  // ran: reached the worker (built fine)
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.ok() || r.error == ErrorKind::kRunTimeout || r.error == ErrorKind::kWrongAnswer) ++ran;
    if (!r.ok()) {
      EXPECT_NE(r.error, ErrorKind::kWrongAnswer) << r.error_message;
      EXPECT_NE(r.error, ErrorKind::kRun) << r.error_message;
      continue;
    }
    ++ok;
    ASSERT_EQ(r.costs.size(), 3u);
    for (double c : r.costs) {
      EXPECT_GT(c, 0);
      EXPECT_LT(c, 1.0);
    }
  }
  EXPECT_GE(ok, 4u);

  testing::register_fault_template();
  auto fault = task_for(device_target, "runner_fault_test", {{"N", "4096"}});
  auto config_of = [&](uint64_t mode, uint64_t split) { return fault.space().get(fault.space().index_of({mode, split})); };
  auto start = Clock::now();
  auto faults = runner.measure({{&fault, config_of(1, 0)},    // crash
                                {&fault, config_of(0, 1)},    // ok
                                {&fault, config_of(2, 1)},    // hang
                                {&fault, config_of(3, 2)},    // wrong
                                {&fault, config_of(0, 3)}});  // ok
  EXPECT_EQ(faults[0].error, ErrorKind::kRun) << faults[0].error_message;
  EXPECT_NE(faults[0].error_message.find("signal 11"), std::string::npos) << faults[0].error_message;
  EXPECT_TRUE(faults[1].ok()) << faults[1].error_message;
  EXPECT_EQ(faults[2].error, ErrorKind::kRunTimeout) << faults[2].error_message;
  EXPECT_GE(faults[2].run_s, 1.5);
  EXPECT_LT(faults[2].run_s, 4.0);
  EXPECT_EQ(faults[3].error, ErrorKind::kWrongAnswer) << faults[3].error_message;
  EXPECT_TRUE(faults[4].ok()) << faults[4].error_message;
  EXPECT_LT(since(start), 20.0);
  // The crash and the hang each cost the worker its child; the worker itself lives on.
  EXPECT_EQ(worker.runners_started(), 3u);
  EXPECT_TRUE(worker.attached());
  EXPECT_EQ(worker.frames_served(), ran + 2u + 5u);  // two references (matmul, fault) + candidates

  // Still serving after the faults.
  auto again = runner.measure({{&fault, config_of(0, 2)}});
  EXPECT_TRUE(again.front().ok()) << again.front().error_message;
}

TEST(RemoteRunner, TaskOfAnotherTargetIsUnsupportedNamingBoth) {
  TuningServer server(loopback());
  DeviceWorker worker(worker_options(server, "cpu-test"));
  RemoteRunner runner(runner_options(server, "cpu-test", 5));
  const std::string other = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  auto task = task_for(other, "matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  try {
    runner.measure({{&task, task.fallback_config()}});
    FAIL() << "expected kUnsupported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("aarch64"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(runner.device().target), std::string::npos) << e.what();
  }
}

TEST(RemoteSession, NoWorkerWithTheKeyFailsWithinTheLeaseTimeout) {
  TuningServer server(loopback());
  DeviceWorker worker(worker_options(server, "other-key"));
  RemoteSessionOptions o;
  o.server = server.address();
  o.device_key = "absent";
  o.lease_timeout_s = 1;
  auto start = Clock::now();
  try {
    RemoteSession session(o);
    FAIL() << "expected kNotFound";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
    EXPECT_NE(std::string(e.what()).find("no free device with key 'absent'"), std::string::npos) << e.what();
  }
  double wall = since(start);
  EXPECT_GE(wall, 0.9);
  EXPECT_LT(wall, 3.0);
}

TEST(RemoteSession, LeasedDeviceIsNotLeasedTwice) {
  TuningServer server(loopback());
  DeviceWorker worker(worker_options(server, "k"));
  RemoteSessionOptions o;
  o.server = server.address();
  o.device_key = "k";
  o.lease_timeout_s = 10;
  {
    RemoteSession first(o);
    o.lease_timeout_s = 0.5;
    try {
      RemoteSession second(o);
      FAIL() << "expected kNotFound";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
      EXPECT_NE(std::string(e.what()).find("all leased"), std::string::npos) << e.what();
    }
  }
  // Ending the first session frees the device.
  o.lease_timeout_s = 5;
  RemoteSession third(o);
  EXPECT_EQ(third.device().key, "k");
}

TEST(RemoteSession, UnreachableServerIsAnIoError) {
  RemoteSessionOptions o;
  o.server = "127.0.0.1:1";
  o.device_key = "k";
  auto start = Clock::now();
  try {
    RemoteSession session(o);
    FAIL() << "expected kIo";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot reach the tuning server at 127.0.0.1:1"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(since(start), 5.0);
  EXPECT_THROW(list_devices("127.0.0.1:1", 2), Error);
}

TEST(RemoteRunner, ThreeClientsShareTwoWorkersOfAKey) {
  TuningServer server(loopback());
  DeviceWorker w1(worker_options(server, "k"));
  DeviceWorker w2(worker_options(server, "k"));
  testing::register_fault_template();
  // Each client leases a device (the third waits for one to be freed), measures, lets go.
  auto client = [&](uint64_t split) {
    RemoteRunner runner(runner_options(server, "k", 5));
    auto task = task_for(runner.device().target, "runner_fault_test", {{"N", "1024"}});
    std::vector<tuner::MeasureInput> inputs;
    for (int i = 0; i < 3; ++i) inputs.push_back({&task, task.space().get(task.space().index_of({0, split}))});
    size_t ok = 0;
    for (const auto& r : runner.measure(inputs)) ok += r.ok();
    return ok;
  };
  std::vector<std::future<size_t>> clients;
  for (uint64_t split = 0; split < 3; ++split) clients.push_back(std::async(std::launch::async, client, split));
  for (auto& c : clients) EXPECT_EQ(c.get(), 3u);
  EXPECT_EQ(w1.frames_served() + w2.frames_served(), 3u * (1 + 3));  // a reference + 3 candidates each
  for (const auto& d : server.devices()) EXPECT_FALSE(d.leased);
}

TEST(DeviceWorker, ReattachesWhenTheServerComesBack) {
  auto server = std::make_unique<TuningServer>(loopback());
  TuningServerOptions same;
  same.port = server->port();
  DeviceWorker worker(worker_options(*server, "k"));
  auto wait_for = [](auto done) {
    for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return worker.attached(); }));
  server.reset();  // the server goes away: the worker keeps trying
  ASSERT_TRUE(wait_for([&] { return !worker.attached(); }));
  server = std::make_unique<TuningServer>(same);
  ASSERT_TRUE(wait_for([&] { return server->devices().size() == 1; }));
  EXPECT_EQ(server->devices()[0].key, "k");
  // The server registers the worker as it sends the acknowledgement the worker waits for.
  EXPECT_TRUE(wait_for([&] { return worker.attached(); }));
}

TEST(RemoteRunner, WorkerLostMidCandidateIsDeviceLostNotAHang) {
  TuningServer server(loopback());
  auto worker = std::make_unique<DeviceWorker>(worker_options(server, "k"));
  RemoteRunner runner(runner_options(server, "k", 4));
  testing::register_fault_template();
  auto fault = task_for(runner.device().target, "runner_fault_test", {{"N", "4096"}});
  auto config_of = [&](uint64_t mode, uint64_t split) { return fault.space().get(fault.space().index_of({mode, split})); };
  ASSERT_TRUE(runner.measure({{&fault, config_of(0, 0)}}).front().ok());

  // The hang keeps the worker busy for the 4 s run timeout; the worker goes away after 0.5 s.
  auto start = Clock::now();
  auto measured = std::async(std::launch::async, [&] {
    try {
      runner.measure({{&fault, config_of(2, 0)}, {&fault, config_of(0, 1)}});
      return std::make_pair(ErrorKind::kInternal, std::string("no error"));
    } catch (const Error& e) {
      return std::make_pair(e.kind(), std::string(e.what()));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  std::thread destroy([&] { worker.reset(); });
  ASSERT_EQ(measured.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto [kind, message] = measured.get();
  double wall = since(start);
  destroy.join();
  EXPECT_EQ(kind, ErrorKind::kIo) << message;
  EXPECT_NE(message.find("device lost"), std::string::npos) << message;
  EXPECT_LT(wall, 3.5) << "the client waited for the run timeout instead of noticing the loss";
  // The session is over for good, and the registry has dropped the worker.
  EXPECT_THROW(runner.measure({{&fault, config_of(0, 1)}}), Error);
  EXPECT_TRUE(server.devices().empty());
}

// Waits up to 10 s for done() to hold; returns whether it does.
template <typename Done>
bool eventually(Done done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return done();
}

TEST(RemoteRunner, SpreadsABatchOverTwoDevicesInInputOrder) {
  TuningServer server(loopback());
  DeviceWorker w1(worker_options(server, "k"));
  DeviceWorker w2(worker_options(server, "k"));
  ASSERT_TRUE(eventually([&] { return server.devices().size() == 2; }));
  RemoteRunnerOptions o = runner_options(server, "k", 5);
  o.devices = 2;
  RemoteRunner runner(o);
  auto leased = runner.devices();
  ASSERT_EQ(leased.size(), 2u);
  EXPECT_NE(leased[0].worker_id, leased[1].worker_id);
  for (const auto& d : server.devices()) EXPECT_TRUE(d.leased);

  // Every config is checked on its device against the task's reference (a wrong output would
  // be kWrongAnswer), so ok() means a correct result.
  auto task = task_for(runner.device().target, "matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  std::mt19937_64 rng(5);
  std::vector<tuner::MeasureInput> inputs;
  for (uint64_t index : task.space().sample(8, rng)) inputs.push_back({&task, task.space().get(index)});
  auto results = runner.measure(inputs);
  ASSERT_EQ(results.size(), 8u);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.error_message;
    ASSERT_EQ(r.costs.size(), 3u);
    for (double c : r.costs) {
      EXPECT_GT(c, 0);
      EXPECT_LT(c, 1.0);
    }
  }
  EXPECT_GT(w1.frames_served(), 0u);
  EXPECT_GT(w2.frames_served(), 0u);
  // 8 candidates, plus the matmul reference once on each device that ran one of them.
  EXPECT_EQ(w1.frames_served() + w2.frames_served(), 8u + 2u);

  // A segfaulting kernel costs its device's child only; each result lands at its own index.
  testing::register_fault_template();
  auto fault = task_for(runner.device().target, "runner_fault_test", {{"N", "4096"}});
  auto config_of = [&](uint64_t mode, uint64_t split) { return fault.space().get(fault.space().index_of({mode, split})); };
  auto faults = runner.measure({{&fault, config_of(1, 0)},    // crash
                                {&fault, config_of(0, 1)},    // ok
                                {&fault, config_of(3, 2)},    // wrong
                                {&fault, config_of(0, 3)},    // ok
                                {&fault, config_of(1, 1)},    // crash
                                {&fault, config_of(0, 0)}});  // ok
  ASSERT_EQ(faults.size(), 6u);
  for (size_t i : {0u, 4u}) {
    EXPECT_EQ(faults[i].error, ErrorKind::kRun) << i << ": " << faults[i].error_message;
    EXPECT_NE(faults[i].error_message.find("signal 11"), std::string::npos) << faults[i].error_message;
  }
  EXPECT_EQ(faults[2].error, ErrorKind::kWrongAnswer) << faults[2].error_message;
  for (size_t i : {1u, 3u, 5u}) EXPECT_TRUE(faults[i].ok()) << i << ": " << faults[i].error_message;
  EXPECT_TRUE(w1.attached());
  EXPECT_TRUE(w2.attached());
}

TEST(RemoteRunner, DeviceLostMidBatchHandsItsCandidateToTheOther) {
  TuningServer server(loopback());
  auto w1 = std::make_unique<DeviceWorker>(worker_options(server, "k"));
  auto w2 = std::make_unique<DeviceWorker>(worker_options(server, "k"));
  ASSERT_TRUE(eventually([&] { return server.devices().size() == 2; }));
  RemoteRunnerOptions o = runner_options(server, "k", 2);
  o.devices = 2;
  RemoteRunner runner(o);
  ASSERT_EQ(runner.devices().size(), 2u);
  testing::register_fault_template();
  auto fault = task_for(runner.device().target, "runner_fault_test", {{"N", "4096"}});
  auto config_of = [&](uint64_t mode, uint64_t split) { return fault.space().get(fault.space().index_of({mode, split})); };

  // The hang (first in line) keeps one device busy for its 2 s run timeout while the other runs
  // the rest; that busy device then goes away, and its candidate must run on the survivor.
  std::vector<tuner::MeasureInput> inputs{{&fault, config_of(2, 0)}};
  for (uint64_t split = 0; split < 4; ++split) inputs.push_back({&fault, config_of(0, split)});
  auto start = Clock::now();
  auto measured = std::async(std::launch::async, [&] { return runner.measure(inputs); });
  // The busy device has served only its reference; the other, its reference and the 4 candidates.
  ASSERT_TRUE(eventually([&] { return w1->frames_served() + w2->frames_served() >= 6; }));
  const bool first_busy = w1->frames_served() < w2->frames_served();
  std::unique_ptr<DeviceWorker>& busy = first_busy ? w1 : w2;
  DeviceWorker& survivor = first_busy ? *w2 : *w1;
  ASSERT_EQ(busy->frames_served(), 1u);
  const size_t survivor_before = survivor.frames_served();
  std::thread destroy([&] { busy.reset(); });
  ASSERT_EQ(measured.wait_for(std::chrono::seconds(15)), std::future_status::ready);
  auto results = measured.get();
  double wall = since(start);
  destroy.join();
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[0].error, ErrorKind::kRunTimeout) << results[0].error_message;
  for (size_t i = 1; i < 5; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].error_message;
  EXPECT_EQ(survivor.frames_served(), survivor_before + 1);  // the moved hang
  EXPECT_LT(wall, 8.0);
  EXPECT_TRUE(eventually([&] { return server.devices().size() == 1; }));

  // Later batches run on the survivor alone.
  auto again = runner.measure({{&fault, config_of(0, 2)}, {&fault, config_of(0, 3)}});
  EXPECT_TRUE(again[0].ok()) << again[0].error_message;
  EXPECT_TRUE(again[1].ok()) << again[1].error_message;
}

TEST(RemoteRunner, AskingForMoreDevicesThanFreeUsesThoseLeased) {
  TuningServer server(loopback());
  DeviceWorker w1(worker_options(server, "k"));
  DeviceWorker w2(worker_options(server, "k"));
  ASSERT_TRUE(eventually([&] { return server.devices().size() == 2; }));
  RemoteRunnerOptions o = runner_options(server, "k", 5);
  o.devices = 3;
  o.session.lease_timeout_s = 1;
  auto start = Clock::now();
  RemoteRunner runner(o);
  EXPECT_LT(since(start), 4.0);  // one lease timeout, not one per device
  auto leased = runner.devices();
  ASSERT_EQ(leased.size(), 2u);
  EXPECT_NE(leased[0].worker_id, leased[1].worker_id);
  testing::register_fault_template();
  auto fault = task_for(runner.device().target, "runner_fault_test", {{"N", "1024"}});
  std::vector<tuner::MeasureInput> inputs;
  for (uint64_t split = 0; split < 4; ++split)
    inputs.push_back({&fault, fault.space().get(fault.space().index_of({0, split}))});
  for (const auto& r : runner.measure(inputs)) EXPECT_TRUE(r.ok()) << r.error_message;

  // No device free at all: today's kNotFound.
  RemoteRunnerOptions none = o;
  none.devices = 2;
  none.session.lease_timeout_s = 0.5;
  try {
    RemoteRunner other(none);
    FAIL() << "expected kNotFound";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
  }
}

}  // namespace
}  // namespace ktune::rpc_runner
