// The CUDA hooks of a build without the CUDA engines: every GPU call says how to get them.
#include "decode_step.h"

namespace mxattn::python {

namespace {

[[noreturn]] void raise_no_cuda(const CallArgs& call) {
  raise_status(Status::unsupported(
      "engine: the tensors are on " + call.placement().describe() +
      " but this build of mxattn has no CUDA engine; rebuild it with CUDA (MXATTN_CUDA=ON pip "
      "install .) or pass host tensors"));
}

}  // namespace

bool cuda_engine_built() {
  return false;
}

Status on_device(int, const std::function<Status()>& work) {
  return work();
}

void run_cuda(const CallArgs& call, uintptr_t) {
  raise_no_cuda(call);
}

struct DecodeStep::State {};

DecodeStep::DecodeStep(const CallArgs& call) {
  raise_no_cuda(call);
}

DecodeStep::DecodeStep(DecodeStep&&) noexcept = default;
DecodeStep& DecodeStep::operator=(DecodeStep&&) noexcept = default;
DecodeStep::~DecodeStep() = default;

void DecodeStep::run(uintptr_t) const {}
int64_t DecodeStep::partial_slots() const {
  return 0;
}
int64_t DecodeStep::split_blocks() const {
  return 0;
}
bool DecodeStep::combines() const {
  return false;
}
int DecodeStep::device_id() const {
  return 0;
}

}  // namespace mxattn::python
