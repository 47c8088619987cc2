#include "runner.h"

#include <chrono>

namespace mxattn::tools {
namespace {

class CpuRunner final : public Runner {
 public:
  CpuRunner(workload::Problem& w, Engine engine, int threads) : w_(w) {
    options_.engine = engine;
    options_.threads = threads;
  }
  const char* name() const override {
    return options_.engine == Engine::cpu_reference ? "cpu-reference" : "cpu-fast";
  }
  Status run(double* seconds) override {
    const auto start = std::chrono::steady_clock::now();
    Status st = attention(w_.args(), options_);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return st;
  }
  Status poison_outputs() override {
    w_.poison_outputs();
    return Status::ok();
  }
  Status fetch_outputs() override { return Status::ok(); }

 private:
  workload::Problem& w_;
  RunOptions options_;
};

}  // namespace

std::unique_ptr<Runner> make_cpu_runner(workload::Problem& w, Engine engine, int threads) {
  return std::make_unique<CpuRunner>(w, engine, threads);
}

}  // namespace mxattn::tools
