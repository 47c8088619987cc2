#include "dist/mpi_session.h"

#include <mpi.h>

#include <mutex>
#include <string>

namespace mxattn::dist {
namespace {

std::mutex g_session_mutex;
std::weak_ptr<MpiSession> g_session;

}  // namespace

Status mpi_error(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return Status::runtime(std::string(call) + " failed: " + std::string(text, size_t(length)));
}

Status MpiSession::acquire(std::shared_ptr<MpiSession>* out) {
  std::lock_guard<std::mutex> lock(g_session_mutex);
  if (std::shared_ptr<MpiSession> live = g_session.lock()) {
    *out = std::move(live);
    return Status::ok();
  }
  int finalized = 0, initialized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return Status::runtime("MPI was finalized already; it cannot start again");
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
        rc != MPI_SUCCESS) {
      return mpi_error("MPI_Init_thread", rc);
    }
  }
  std::shared_ptr<MpiSession> session(new MpiSession(!initialized));
  g_session = session;
  *out = std::move(session);
  return Status::ok();
}

MpiSession::~MpiSession() {
  if (finalize_) MPI_Finalize();
}

}  // namespace mxattn::dist
