// Host memory for communicators whose ranks are CPU processes (MPI).
#pragma once

#include <cstdint>

#include "mxattn/dist.h"

namespace mxattn::dist {

Status host_allocate(int64_t bytes, void** data);
void host_deallocate(void* data);
// Runs the copies with the OpenMP threads, rows shared out over all copies at once.
void host_copy_2d(const Copy2D* copies, int64_t count);

}  // namespace mxattn::dist
