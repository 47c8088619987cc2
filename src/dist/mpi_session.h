// MPI's process-wide state: initialized by whoever comes first, finalized by whoever initialized
// it. Communicators that need MPI hold the session, so MPI_Finalize runs after the last of them.
#pragma once

#include <memory>

#include "mxattn/status.h"

namespace mxattn::dist {

class MpiSession {
 public:
  // The live session, initializing MPI (thread level funneled) if nobody has. Fails after
  // MPI_Finalize: MPI cannot start twice in one process.
  static Status acquire(std::shared_ptr<MpiSession>* out);

  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession();

 private:
  explicit MpiSession(bool finalize) : finalize_(finalize) {}
  bool finalize_;  // true when this session called MPI_Init
};

// "MPI_Xxx failed: <MPI's error string>" for an MPI return code.
Status mpi_error(const char* call, int code);

}  // namespace mxattn::dist
