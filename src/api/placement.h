// Where a call's tensors live: all in host memory or all on one GPU, checked once for every view
// of a call, with a message that names the view that differs.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "api/engines.h"
#include "mxattn/status.h"
#include "mxattn/tensor.h"

namespace mxattn::api {

using NamedView = std::pair<const char*, const TensorView*>;

// Sets `on_gpu` from the first given view with memory and checks that every other given view with
// memory lies on the same side.
inline Status same_memory(std::initializer_list<NamedView> views, bool* on_gpu) {
  const NamedView* first = nullptr;
  for (const NamedView& v : views) {
    if (!v.second->given() || v.second->data == nullptr) continue;
    const bool gpu = is_device_pointer(v.second->data);
    if (first == nullptr) {
      first = &v;
      *on_gpu = gpu;
    } else if (gpu != *on_gpu) {
      return Status::invalid(std::string(v.first) + " is in " + (gpu ? "device" : "host") +
                             " memory but " + first->first + " is in " +
                             (*on_gpu ? "device" : "host") + " memory; pass them all on one side");
    }
  }
  if (first == nullptr) *on_gpu = false;
  return Status::ok();
}

}  // namespace mxattn::api
