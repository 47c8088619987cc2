// The extension module behind the `mxattn` Python package. The package's Python layer turns the
// caller's framework objects into arrays and element-type names; this module checks nothing of its
// own beyond the storage of each array: every rule is the C++ library's.
#include "bindings.h"

NB_MODULE(_mxattn, m) {
  m.doc() = "mxattn's C++ engines over DLPack arrays (use the `mxattn` package, not this module)";
  mxattn::python::bind_attention(m);
  mxattn::python::bind_mx(m);
}
