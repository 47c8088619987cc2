// The NCCL backend: one GPU per rank, device memory, everything on one CUDA stream of the rank. The
// all-to-all is NCCL's grouped point-to-point form (ncclSend/ncclRecv per peer inside
// ncclGroupStart/End), which takes a different byte count per peer; the small host collectives go
// through a device scratch buffer.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "mxattn/dist.h"

#if MXATTN_DIST_MPI
#include <mpi.h>

#include "dist/mpi_session.h"
#endif

namespace mxattn::dist {
namespace {

static_assert(NCCL_UNIQUE_ID_BYTES == kNcclUniqueIdBytes);

Status cuda_error(const char* call, cudaError_t code) {
  return Status::runtime(std::string(call) + " failed: " + cudaGetErrorString(code));
}

// The allocation holding `p` as "bytes [begin, end) of an allocation of n bytes", through the
// driver's cuMemGetAddressRange (looked up at run time: no link to libcuda); "" when unknown.
std::string allocation_of(const void* p) {
  using AddressRange = int (*)(unsigned long long*, size_t*, unsigned long long);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || fn == nullptr) {
    cudaGetLastError();
    return "";
  }
  unsigned long long base = 0;
  size_t size = 0;
  if (reinterpret_cast<AddressRange>(fn)(&base, &size, reinterpret_cast<uintptr_t>(p)) != 0) {
    return ", outside any device allocation";
  }
  return ", at byte " + std::to_string(reinterpret_cast<uintptr_t>(p) - base) +
         " of an allocation of " + std::to_string(size) + " bytes";
}

// "device memory", "host memory" or "memory CUDA does not know", for error messages.
std::string memory_kind(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();
    return "memory CUDA does not know";
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      return "device memory";
    case cudaMemoryTypeManaged:
      return "managed memory";
    case cudaMemoryTypeHost:
      return "pinned host memory";
    default:
      return "host memory";
  }
}

Status nccl_error(const char* call, ncclResult_t code) {
  return Status::runtime(std::string(call) + " failed: " + ncclGetErrorString(code));
}

#define MXATTN_CUDA_TRY(call)                               \
  do {                                                      \
    if (cudaError_t code_ = (call); code_ != cudaSuccess) { \
      return cuda_error(#call, code_);                      \
    }                                                       \
  } while (0)

#define MXATTN_NCCL_TRY(call)                                \
  do {                                                       \
    if (ncclResult_t code_ = (call); code_ != ncclSuccess) { \
      return nccl_error(#call, code_);                       \
    }                                                        \
  } while (0)

class NcclCommunicator final : public Communicator {
 public:
  // `keep_alive` holds whatever bootstrapped the ranks (the MPI session) for the communicator's
  // life.
  static Status create(const NcclRanks& ranks, std::shared_ptr<void> keep_alive,
                       std::unique_ptr<Communicator>* out) {
    if (ranks.size < 1 || ranks.rank < 0 || ranks.rank >= ranks.size) {
      return Status::invalid("NCCL ranks: rank " + std::to_string(ranks.rank) + " is outside [0, " +
                             std::to_string(ranks.size) + ")");
    }
    int devices = 0;
    MXATTN_CUDA_TRY(cudaGetDeviceCount(&devices));
    if (devices < 1) return Status::runtime("NCCL backend: no CUDA device is visible");
    const int device = ranks.device >= 0 ? ranks.device : ranks.rank % devices;
    if (device >= devices) {
      return Status::invalid("NCCL ranks: device " + std::to_string(device) + " but only " +
                             std::to_string(devices) + " are visible");
    }
    std::unique_ptr<NcclCommunicator> c(new NcclCommunicator(ranks, device));
    c->keep_alive_ = std::move(keep_alive);
    MXATTN_CUDA_TRY(cudaSetDevice(device));
    MXATTN_CUDA_TRY(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
    ncclUniqueId id;
    std::memcpy(id.internal, ranks.id.data(), sizeof(id.internal));
    MXATTN_NCCL_TRY(ncclCommInitRank(&c->comm_, ranks.size, id, ranks.rank));
    *out = std::move(c);
    return Status::ok();
  }

  ~NcclCommunicator() override {
    cudaSetDevice(device_);
    if (comm_ != nullptr) {
      ncclCommFinalize(comm_);
      ncclCommDestroy(comm_);
    }
    if (scratch_ != nullptr) cudaFree(scratch_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  Backend backend() const override { return Backend::nccl; }
  MemorySpace memory() const override { return MemorySpace::cuda; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status all_to_all(const void* send, const int64_t* send_counts, const int64_t* send_displs,
                    void* recv, const int64_t* recv_counts, const int64_t* recv_displs) override {
    MXATTN_CUDA_TRY(cudaSetDevice(device_));
    MXATTN_NCCL_TRY(ncclGroupStart());
    // The group is closed whatever happens inside it, so the communicator stays usable.
    ncclResult_t queued = ncclSuccess;
    for (int p = 0; p < size_ && queued == ncclSuccess; ++p) {
      if (send_counts[p] > 0) {
        queued = ncclSend(static_cast<const std::byte*>(send) + send_displs[p],
                          size_t(send_counts[p]), ncclUint8, p, comm_, stream_);
      }
      if (queued == ncclSuccess && recv_counts[p] > 0) {
        queued = ncclRecv(static_cast<std::byte*>(recv) + recv_displs[p], size_t(recv_counts[p]),
                          ncclUint8, p, comm_, stream_);
      }
    }
    const ncclResult_t ended = ncclGroupEnd();
    if (queued != ncclSuccess) return nccl_error("ncclSend/ncclRecv", queued);
    if (ended != ncclSuccess) return nccl_error("ncclGroupEnd", ended);
    return Status::ok();
  }

  Status all_gather(const void* mine, int64_t bytes, void* all) override {
    if (Status st = reserve_scratch(bytes * (size_ + 1)); !st) return st;
    std::byte* everyone = scratch_ + bytes;
    MXATTN_CUDA_TRY(
        cudaMemcpyAsync(scratch_, mine, size_t(bytes), cudaMemcpyHostToDevice, stream_));
    MXATTN_NCCL_TRY(ncclAllGather(scratch_, everyone, size_t(bytes), ncclUint8, comm_, stream_));
    MXATTN_CUDA_TRY(cudaMemcpyAsync(all, everyone, size_t(bytes) * size_t(size_),
                                    cudaMemcpyDeviceToHost, stream_));
    return synchronize();
  }

  Status all_reduce_max(float* values, int64_t count) override {
    const int64_t bytes = count * int64_t(sizeof(float));
    if (Status st = reserve_scratch(bytes); !st) return st;
    MXATTN_CUDA_TRY(
        cudaMemcpyAsync(scratch_, values, size_t(bytes), cudaMemcpyHostToDevice, stream_));
    MXATTN_NCCL_TRY(
        ncclAllReduce(scratch_, scratch_, size_t(count), ncclFloat32, ncclMax, comm_, stream_));
    MXATTN_CUDA_TRY(
        cudaMemcpyAsync(values, scratch_, size_t(bytes), cudaMemcpyDeviceToHost, stream_));
    return synchronize();
  }

  Status allocate(int64_t bytes, void** data) override {
    MXATTN_CUDA_TRY(cudaSetDevice(device_));
    // At least one byte, so that an empty tensor still has a non-null pointer.
    MXATTN_CUDA_TRY(cudaMalloc(data, size_t(bytes > 0 ? bytes : 1)));
    return Status::ok();
  }
  void deallocate(void* data) override { cudaFree(data); }

  Status copy_2d(const Copy2D* copies, int64_t count) override {
    for (int64_t c = 0; c < count; ++c) {
      const Copy2D& k = copies[c];
      if (k.width == 0 || k.height == 0) continue;
      cudaError_t e = cudaSuccess;
      if (k.height == 1 || (k.src_pitch == k.width && k.dst_pitch == k.width)) {
        // Contiguous rows: one flat copy.
        e = cudaMemcpyAsync(k.dst, k.src, size_t(k.width * k.height), cudaMemcpyDefault, stream_);
      } else {
        e = cudaMemcpy2DAsync(k.dst, size_t(k.dst_pitch), k.src, size_t(k.src_pitch),
                              size_t(k.width), size_t(k.height), cudaMemcpyDefault, stream_);
      }
      if (e != cudaSuccess) {
        return Status::runtime(
            "copy_2d: copy of " + std::to_string(k.height) + " rows of " + std::to_string(k.width) +
            " bytes (source pitch " + std::to_string(k.src_pitch) + " in " + memory_kind(k.src) +
            allocation_of(k.src) + ", destination pitch " + std::to_string(k.dst_pitch) + " in " +
            memory_kind(k.dst) + allocation_of(k.dst) + ") failed: " + cudaGetErrorString(e));
      }
    }
    return Status::ok();
  }
  Status copy_to_host(void* host, const void* data, int64_t bytes) override {
    MXATTN_CUDA_TRY(cudaMemcpyAsync(host, data, size_t(bytes), cudaMemcpyDeviceToHost, stream_));
    return synchronize();
  }
  Status copy_from_host(void* data, const void* host, int64_t bytes) override {
    MXATTN_CUDA_TRY(cudaMemcpyAsync(data, host, size_t(bytes), cudaMemcpyHostToDevice, stream_));
    return synchronize();
  }
  void* stream() const override { return stream_; }
  Status synchronize() override {
    MXATTN_CUDA_TRY(cudaStreamSynchronize(stream_));
    ncclResult_t async = ncclSuccess;
    MXATTN_NCCL_TRY(ncclCommGetAsyncError(comm_, &async));
    if (async != ncclSuccess) return nccl_error("an NCCL operation", async);
    return Status::ok();
  }

 private:
  NcclCommunicator(const NcclRanks& ranks, int device)
      : rank_(ranks.rank), size_(ranks.size), device_(device) {}

  Status reserve_scratch(int64_t bytes) {
    if (bytes <= scratch_bytes_) return Status::ok();
    MXATTN_CUDA_TRY(cudaSetDevice(device_));
    if (scratch_ != nullptr) {
      MXATTN_CUDA_TRY(cudaStreamSynchronize(stream_));
      MXATTN_CUDA_TRY(cudaFree(scratch_));
      scratch_ = nullptr;
      scratch_bytes_ = 0;
    }
    void* p = nullptr;
    MXATTN_CUDA_TRY(cudaMalloc(&p, size_t(bytes)));
    scratch_ = static_cast<std::byte*>(p);
    scratch_bytes_ = bytes;
    return Status::ok();
  }

  int rank_;
  int size_;
  int device_;
  std::shared_ptr<void> keep_alive_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::byte* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
};

}  // namespace

bool built_with_nccl() {
  return true;
}

Status make_nccl_unique_id(NcclUniqueId* id) {
  ncclUniqueId made;
  MXATTN_NCCL_TRY(ncclGetUniqueId(&made));
  std::memcpy(id->data(), made.internal, id->size());
  return Status::ok();
}

Status make_nccl_communicator(const NcclRanks& ranks, std::unique_ptr<Communicator>* out) {
  return NcclCommunicator::create(ranks, nullptr, out);
}

#if MXATTN_DIST_MPI
Status make_nccl_communicator_over_mpi(int device, std::unique_ptr<Communicator>* out) {
  std::shared_ptr<MpiSession> session;
  if (Status st = MpiSession::acquire(&session); !st) return st;
  NcclRanks ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &ranks.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks.size);
  ranks.device = device;
  if (device < 0) {
    // The GPU of this rank's place among the ranks of its node.
    MPI_Comm node = MPI_COMM_NULL;
    if (int code = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ranks.rank,
                                       MPI_INFO_NULL, &node);
        code != MPI_SUCCESS) {
      return mpi_error("MPI_Comm_split_type", code);
    }
    int local_rank = 0, devices = 0;
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
    MXATTN_CUDA_TRY(cudaGetDeviceCount(&devices));
    ranks.device = devices > 0 ? local_rank % devices : 0;
  }
  Status made = ranks.rank == 0 ? make_nccl_unique_id(&ranks.id) : Status::ok();
  // Rank 0 broadcasts whether it made the id, so that a failure there does not leave the others
  // waiting inside ncclCommInitRank.
  int made_ok = made.is_ok() ? 1 : 0;
  if (int code = MPI_Bcast(&made_ok, 1, MPI_INT, 0, MPI_COMM_WORLD); code != MPI_SUCCESS) {
    return mpi_error("MPI_Bcast", code);
  }
  if (!made_ok) return made.is_ok() ? Status::runtime("rank 0 could not make the NCCL id") : made;
  if (int code = MPI_Bcast(ranks.id.data(), kNcclUniqueIdBytes, MPI_BYTE, 0, MPI_COMM_WORLD);
      code != MPI_SUCCESS) {
    return mpi_error("MPI_Bcast", code);
  }
  return NcclCommunicator::create(ranks, std::move(session), out);
}
#else
Status make_nccl_communicator_over_mpi(int, std::unique_ptr<Communicator>*) {
  return Status::unsupported("mxattn was built without MPI: pass the NCCL id with NcclRanks");
}
#endif

}  // namespace mxattn::dist
