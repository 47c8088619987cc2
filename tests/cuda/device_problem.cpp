#include "cuda/device_problem.h"

#include <stdexcept>

namespace mxattn::test {
namespace {

void check(const Status& st) {
  if (!st) throw std::runtime_error(st.message());
}

}  // namespace

DeviceProblem::DeviceProblem(const TestProblem& host) {
  check(cuda::DeviceArgs::upload(host.args(), &device_));
}

void DeviceProblem::upload_inputs(const TestProblem& host) {
  check(device_.upload_inputs(host.args()));
}

void DeviceProblem::poison_outputs() {
  check(device_.poison_outputs());
}

void DeviceProblem::download_outputs(const TestProblem& host) const {
  check(device_.download_outputs(host.args()));
}

}  // namespace mxattn::test
