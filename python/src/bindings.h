// The pieces of the extension module `mxattn._mxattn`, each registering its functions.
#pragma once

#include <nanobind/nanobind.h>

namespace mxattn::python {

void bind_attention(nanobind::module_& m);
void bind_mx(nanobind::module_& m);

}  // namespace mxattn::python
