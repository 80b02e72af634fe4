// Defines the workloads several benchmarks share: the six kernels of shipped_vs_recorded and
// tuned_vs_library --threads.
#pragma once

#include <string>
#include <vector>

namespace ktune::bench {

struct Workload {
  std::string name, template_name;
  std::vector<std::string> args;  // "K=V" as on the ktune command line
};

// Four ResNet-18 conv2d_nchwc layers (blocks chosen from the shape) and two matmuls.
inline const std::vector<Workload>& resnet_and_matmul_workloads() {
  static const std::vector<Workload> w = {
      {"conv 56x56 C64 K64",
       "conv2d_nchwc",
       {"C=64", "H=56", "W=56", "K=64", "R=3", "S=3", "pad=1"}},
      {"conv 28x28 C128 K128",
       "conv2d_nchwc",
       {"C=128", "H=28", "W=28", "K=128", "R=3", "S=3", "pad=1"}},
      {"conv 14x14 C256 K256",
       "conv2d_nchwc",
       {"C=256", "H=14", "W=14", "K=256", "R=3", "S=3", "pad=1"}},
      {"conv 7x7 C512 K512",
       "conv2d_nchwc",
       {"C=512", "H=7", "W=7", "K=512", "R=3", "S=3", "pad=1"}},
      {"matmul 512^3", "matmul", {"M=512", "N=512", "K=512"}},
      {"matmul 1024^3", "matmul", {"M=1024", "N=1024", "K=1024"}},
  };
  return w;
}

// ResNet-18's 3x3 convolutions: the four stride-1 layers of resnet_and_matmul_workloads(), then
// the three stride-2 layers that open stages 2-4.
inline const std::vector<Workload>& resnet_3x3_workloads() {
  static const std::vector<Workload> w = [] {
    std::vector<Workload> all;
    for (const Workload& x : resnet_and_matmul_workloads())
      if (x.template_name == "conv2d_nchwc") all.push_back(x);
    all.push_back({"conv s2 56x56 C64 K128",
                   "conv2d_nchwc",
                   {"C=64", "H=56", "W=56", "K=128", "R=3", "S=3", "stride=2", "pad=1"}});
    all.push_back({"conv s2 28x28 C128 K256",
                   "conv2d_nchwc",
                   {"C=128", "H=28", "W=28", "K=256", "R=3", "S=3", "stride=2", "pad=1"}});
    all.push_back({"conv s2 14x14 C256 K512",
                   "conv2d_nchwc",
                   {"C=256", "H=14", "W=14", "K=512", "R=3", "S=3", "stride=2", "pad=1"}});
    return all;
  }();
  return w;
}

}  // namespace ktune::bench
