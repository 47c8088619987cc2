// Build-wide macros shared by host and device code.
#pragma once

#if defined(__CUDACC__)
#define MXATTN_HD __host__ __device__
#else
#define MXATTN_HD
#endif
