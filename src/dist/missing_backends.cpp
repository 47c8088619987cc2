// The factories of the backends this build lacks: they say so instead of failing to link.
#include "mxattn/dist.h"

namespace mxattn::dist {

#if !MXATTN_DIST_MPI
bool built_with_mpi() {
  return false;
}

Status make_mpi_communicator(const MpiOptions&, std::unique_ptr<Communicator>*) {
  return Status::unsupported(
      "mxattn was built without MPI (install libopenmpi-dev openmpi-bin and reconfigure)");
}
#endif

#if !MXATTN_DIST_NCCL
bool built_with_nccl() {
  return false;
}

Status make_nccl_unique_id(NcclUniqueId*) {
  return Status::unsupported("mxattn was built without NCCL (it needs CUDA and libnccl)");
}

Status make_nccl_communicator(const NcclRanks&, std::unique_ptr<Communicator>*) {
  return make_nccl_unique_id(nullptr);
}

Status make_nccl_communicator_over_mpi(int, std::unique_ptr<Communicator>*) {
  return make_nccl_unique_id(nullptr);
}
#endif

}  // namespace mxattn::dist
