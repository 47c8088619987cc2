// The MPI backend: CPU ranks, one process each, host memory. The all-to-all is MPI_Alltoallv, or,
// when a segment or offset does not fit MPI-3's int counts, rounds of MPI_Alltoallw whose datatypes
// address each segment piece by its 64-bit address.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dist/host_memory.h"
#include "dist/mpi_session.h"
#include "mxattn/dist.h"

namespace mxattn::dist {
namespace {

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::shared_ptr<MpiSession> session, MPI_Comm comm, int64_t max_bytes_per_call)
      : session_(std::move(session)), comm_(comm), max_bytes_per_call_(max_bytes_per_call) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }

  Backend backend() const override { return Backend::mpi; }
  MemorySpace memory() const override { return MemorySpace::host; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status all_to_all(const void* send, const int64_t* send_counts, const int64_t* send_displs,
                    void* recv, const int64_t* recv_counts, const int64_t* recv_displs) override {
    const size_t n = size_t(size_);
    const int64_t limit = std::min<int64_t>(max_bytes_per_call_, INT_MAX);
    bool fits = true;
    for (size_t p = 0; p < n; ++p) {
      fits = fits && send_counts[p] <= limit && recv_counts[p] <= limit &&
             send_displs[p] <= INT_MAX && recv_displs[p] <= INT_MAX;
    }
    if (!fits)
      return all_to_all_in_rounds(send, send_counts, send_displs, recv, recv_counts, recv_displs,
                                  limit);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    for (size_t p = 0; p < n; ++p) {
      sc[p] = int(send_counts[p]);
      sd[p] = int(send_displs[p]);
      rc[p] = int(recv_counts[p]);
      rd[p] = int(recv_displs[p]);
    }
    if (int code = MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(),
                                 MPI_BYTE, comm_);
        code != MPI_SUCCESS) {
      return mpi_error("MPI_Alltoallv", code);
    }
    return Status::ok();
  }

  Status all_gather(const void* mine, int64_t bytes, void* all) override {
    if (bytes > INT_MAX) {
      return Status::invalid("all_gather moves at most " + std::to_string(INT_MAX) +
                             " bytes per rank, not " + std::to_string(bytes));
    }
    if (int code = MPI_Allgather(mine, int(bytes), MPI_BYTE, all, int(bytes), MPI_BYTE, comm_);
        code != MPI_SUCCESS) {
      return mpi_error("MPI_Allgather", code);
    }
    return Status::ok();
  }

  Status all_reduce_max(float* values, int64_t count) override {
    for (int64_t done = 0; done < count;) {
      const int piece = int(std::min<int64_t>(count - done, INT_MAX));
      if (int code = MPI_Allreduce(MPI_IN_PLACE, values + done, piece, MPI_FLOAT, MPI_MAX, comm_);
          code != MPI_SUCCESS) {
        return mpi_error("MPI_Allreduce", code);
      }
      done += piece;
    }
    return Status::ok();
  }

  Status allocate(int64_t bytes, void** data) override { return host_allocate(bytes, data); }
  void deallocate(void* data) override { host_deallocate(data); }
  Status copy_2d(const Copy2D* copies, int64_t count) override {
    host_copy_2d(copies, count);
    return Status::ok();
  }
  Status copy_to_host(void* host, const void* data, int64_t bytes) override {
    std::memcpy(host, data, size_t(bytes));
    return Status::ok();
  }
  Status copy_from_host(void* data, const void* host, int64_t bytes) override {
    std::memcpy(data, host, size_t(bytes));
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }

 private:
  // Round k moves bytes [k * limit, (k + 1) * limit) of every segment. Each piece is described by
  // an hindexed type holding its absolute address (MPI_Aint is 64-bit), relative to MPI_BOTTOM.
  Status all_to_all_in_rounds(const void* send, const int64_t* send_counts,
                              const int64_t* send_displs, void* recv, const int64_t* recv_counts,
                              const int64_t* recv_displs, int64_t limit) {
    const size_t n = size_t(size_);
    int64_t longest = 0;
    for (size_t p = 0; p < n; ++p) longest = std::max({longest, send_counts[p], recv_counts[p]});
    // Every rank must make the same number of MPI calls: agree on the longest segment.
    if (int code = MPI_Allreduce(MPI_IN_PLACE, &longest, 1, MPI_INT64_T, MPI_MAX, comm_);
        code != MPI_SUCCESS) {
      return mpi_error("MPI_Allreduce", code);
    }
    const int64_t rounds = (longest + limit - 1) / limit;
    std::vector<int> send_n(n), recv_n(n), zeros(n, 0);
    std::vector<MPI_Datatype> send_types(n), recv_types(n);
    for (int64_t k = 0; k < rounds; ++k) {
      std::fill(send_types.begin(), send_types.end(), MPI_BYTE);
      std::fill(recv_types.begin(), recv_types.end(), MPI_BYTE);
      const auto piece = [&](const void* base, int64_t count, int64_t displ, int* pieces,
                             MPI_Datatype* type) -> Status {
        const int64_t first = k * limit;
        const int length = int(std::clamp<int64_t>(count - first, 0, limit));
        *pieces = length > 0 ? 1 : 0;
        *type = MPI_BYTE;
        if (length == 0) return Status::ok();
        MPI_Aint address = 0;
        MPI_Get_address(static_cast<const std::byte*>(base) + displ + first, &address);
        if (int code = MPI_Type_create_hindexed(1, &length, &address, MPI_BYTE, type);
            code != MPI_SUCCESS) {
          return mpi_error("MPI_Type_create_hindexed", code);
        }
        return MPI_Type_commit(type) == MPI_SUCCESS ? Status::ok()
                                                    : Status::runtime("MPI_Type_commit failed");
      };
      Status st;
      for (size_t p = 0; p < n && st; ++p) {
        st = piece(send, send_counts[p], send_displs[p], &send_n[p], &send_types[p]);
        if (st) st = piece(recv, recv_counts[p], recv_displs[p], &recv_n[p], &recv_types[p]);
      }
      if (st) {
        if (int code =
                MPI_Alltoallw(MPI_BOTTOM, send_n.data(), zeros.data(), send_types.data(),
                              MPI_BOTTOM, recv_n.data(), zeros.data(), recv_types.data(), comm_);
            code != MPI_SUCCESS) {
          st = mpi_error("MPI_Alltoallw", code);
        }
      }
      for (size_t p = 0; p < n; ++p) {
        if (send_types[p] != MPI_BYTE) MPI_Type_free(&send_types[p]);
        if (recv_types[p] != MPI_BYTE) MPI_Type_free(&recv_types[p]);
      }
      if (!st) return st;
    }
    return Status::ok();
  }

  std::shared_ptr<MpiSession> session_;
  MPI_Comm comm_;
  int64_t max_bytes_per_call_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace

bool built_with_mpi() {
  return true;
}

Status make_mpi_communicator(const MpiOptions& options, std::unique_ptr<Communicator>* out) {
  if (options.max_bytes_per_call < 1) {
    return Status::invalid("max_bytes_per_call must be at least 1, not " +
                           std::to_string(options.max_bytes_per_call));
  }
  std::shared_ptr<MpiSession> session;
  if (Status st = MpiSession::acquire(&session); !st) return st;
  const MPI_Comm parent =
      options.mpi_comm ? *static_cast<const MPI_Comm*>(options.mpi_comm) : MPI_COMM_WORLD;
  MPI_Comm comm = MPI_COMM_NULL;
  // A duplicate keeps the exchanges' messages apart from the caller's own.
  if (int code = MPI_Comm_dup(parent, &comm); code != MPI_SUCCESS) {
    return mpi_error("MPI_Comm_dup", code);
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  *out = std::make_unique<MpiCommunicator>(std::move(session), comm, options.max_bytes_per_call);
  return Status::ok();
}

}  // namespace mxattn::dist
