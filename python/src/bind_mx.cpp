// MX quantization of whole tensors, and its inverse.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "decode_step.h"
#include "mxattn/kv_cache.h"
#include "mxattn/mx.h"

namespace mxattn::python {

namespace {

ScaleMode parse_mode(const std::string& mode) {
  if (mode == "floor") return ScaleMode::floor;
  if (mode == "rceil") return ScaleMode::rceil;
  throw nb::value_error(("mode must be 'floor' or 'rceil', found '" + mode + "'").c_str());
}

// Where one array of a call lives (absent: an optional array not given).
struct Where {
  const char* name;
  bool given;
  int device_type;
  int device_id;
};
template <class Array>
Where where_of(const char* name, const Array& a) {
  return {name, true, a.device_type(), a.device_id()};
}
template <class Array>
Where where_of(const char* name, const std::optional<Array>& a) {
  return a ? where_of(name, *a) : Where{name, false, 0, 0};
}

// The one memory every array of a call lives in: the host, or one GPU (whose device is made
// current for the call).
Placement common_placement(std::initializer_list<Where> arrays) {
  std::optional<Placement> where;
  const char* first = nullptr;
  for (const Where& w : arrays) {
    if (!w.given) continue;
    const Placement p = placement_of(w.device_type, w.device_id, w.name);
    if (!where) {
      where = p;
      first = w.name;
    } else if (!(p == *where)) {
      raise_status(Status::invalid(std::string(w.name) + " is on " + p.describe() + " but " +
                                   first + " is on " + where->describe() +
                                   "; pass them all on one device"));
    }
  }
  return where.value_or(Placement{});
}

// Runs `work` without the GIL, on the GPU of `where` when it is one.
void run_released(Placement where, const std::function<Status()>& work) {
  Status status;
  {
    nb::gil_scoped_release released;
    status = where.on_gpu ? on_device(where.device_id, work) : work();
  }
  raise_if_failed(status);
}

// An axis counted from the end when negative, as NumPy counts it.
int resolve_axis(int64_t axis, size_t rank) {
  const int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) {
    throw nb::value_error(("axis " + std::to_string(axis) + " is outside [" + std::to_string(-r) +
                           ", " + std::to_string(r) + ") for a tensor of rank " + std::to_string(r))
                              .c_str());
  }
  return int(axis < 0 ? axis + r : axis);
}

// The storage of a tensor of `shape` quantized to `format` in blocks along `axis`: its codes as
// bytes (packed formats pack the last axis, so it must hold whole groups) and its E8M0 scales.
nb::tuple quantized_shapes(const std::vector<int64_t>& shape, const std::string& format,
                           int64_t axis) {
  const DType type = parse_element_type("format", format);
  if (!is_mx(type)) {
    throw nb::value_error(("format must be an MX element type (e4m3, e5m2, e2m3, e3m2, e2m1), "
                           "found " +
                           std::string(name_of(type)))
                              .c_str());
  }
  if (shape.empty()) throw nb::value_error("x is a 0-d array; quantize needs rank >= 1");
  const int a = resolve_axis(axis, shape.size());
  std::vector<int64_t> data = shape;
  std::vector<int64_t> scales = shape;
  const int64_t group = pack_group(type);
  if (data.back() % group != 0) {
    throw nb::value_error(("x: " + std::string(name_of(type)) + " packs " + std::to_string(group) +
                           " elements into " + std::to_string(group * bits_of(type) / 8) +
                           " bytes along the last axis, whose length " +
                           std::to_string(data.back()) + " is not a multiple of " +
                           std::to_string(group))
                              .c_str());
  }
  data.back() = data.back() * bits_of(type) / 8;
  scales[size_t(a)] = (shape[size_t(a)] + kMxBlock - 1) / kMxBlock;
  return nb::make_tuple(nb::tuple(nb::cast(data)), nb::tuple(nb::cast(scales)));
}

void quantize_array(const InputArray& src, const std::string& src_type, const OutputArray& data,
                    const OutputArray& scales, const std::string& format, int64_t axis,
                    const std::string& mode, uintptr_t stream) {
  const Placement where =
      common_placement({where_of("x", src), where_of("data", data), where_of("scales", scales)});
  const TensorView s = view_of("x", src, parse_element_type("x", src_type));
  const TensorView d = view_of("data", data, parse_element_type("format", format));
  const TensorView sc = view_of("scales", scales, DType::e8m0);
  const int a = resolve_axis(axis, src.ndim());
  const ScaleMode m = parse_mode(mode);
  run_released(where, [&] { return quantize(s, d, sc, a, m, reinterpret_cast<void*>(stream)); });
}

void dequantize_array(const InputArray& data, const std::string& format, const InputArray& scales,
                      int64_t axis, const OutputArray& dst, const std::string& dst_type,
                      uintptr_t stream) {
  const Placement where =
      common_placement({where_of("data", data), where_of("scales", scales), where_of("out", dst)});
  const TensorView d = view_of("data", data, parse_element_type("format", format));
  const TensorView sc = view_of("scales", scales, DType::e8m0);
  const TensorView o = view_of("out", dst, parse_element_type("dtype", dst_type));
  const int a = resolve_axis(axis, dst.ndim());
  run_released(where, [&] { return dequantize(d, sc, a, o, reinterpret_cast<void*>(stream)); });
}

void quantize_keys_array(const InputArray& k, const std::string& k_type, const OutputArray& data,
                         const OutputArray& scales, const std::string& format,
                         const std::string& mode, bool rotate,
                         const std::optional<OutputArray>& k_mean,
                         const std::optional<InputArray>& kv_len, uintptr_t stream) {
  const Placement where =
      common_placement({where_of("k", k), where_of("data", data), where_of("scales", scales),
                        where_of("k_mean", k_mean), where_of("kv_len", kv_len)});
  const TensorView kv = view_of("k", k, parse_element_type("k", k_type));
  const TensorView d = view_of("data", data, parse_element_type("format", format));
  const TensorView sc = view_of("scales", scales, DType::e8m0);
  KeyTransforms t;
  t.rotate = rotate;
  if (k_mean) t.k_mean = view_of("k_mean", *k_mean, DType::f32);
  if (kv_len) t.kv_len = view_of("kv_len", *kv_len, DType::i32);
  const ScaleMode m = parse_mode(mode);
  run_released(where,
               [&] { return quantize_keys(kv, d, sc, m, t, reinterpret_cast<void*>(stream)); });
}

// A cache write (spec §11); optional arrays are None.
void write_kv_arrays(const InputArray& k, const std::string& k_type, const InputArray& v,
                     const std::string& v_type, const OutputArray& k_cache,
                     const std::string& k_cache_type, const OutputArray& v_cache,
                     const std::string& v_cache_type, const InputArray& slots,
                     const std::string& slots_type, const std::optional<OutputArray>& k_scales,
                     const std::optional<OutputArray>& v_scales,
                     const std::optional<InputArray>& k_mean,
                     const std::optional<OutputArray>& invalid_slots, const std::string& mode,
                     bool rotate, uintptr_t stream) {
  const Placement where =
      common_placement({where_of("k_cache", k_cache), where_of("v_cache", v_cache),
                        where_of("k", k), where_of("v", v), where_of("slot_mapping", slots),
                        where_of("k_scales", k_scales), where_of("v_scales", v_scales),
                        where_of("k_mean", k_mean), where_of("invalid_slots", invalid_slots)});
  KvWriteArgs a;
  a.k = view_of("k", k, parse_element_type("k", k_type));
  a.v = view_of("v", v, parse_element_type("v", v_type));
  a.k_cache = view_of("k_cache", k_cache, parse_element_type("format", k_cache_type));
  a.v_cache = view_of("v_cache", v_cache, parse_element_type("format", v_cache_type));
  a.slot_mapping = view_of("slot_mapping", slots, parse_element_type("slot_mapping", slots_type));
  if (k_scales) a.k_scales = view_of("k_scales", *k_scales, DType::e8m0);
  if (v_scales) a.v_scales = view_of("v_scales", *v_scales, DType::e8m0);
  if (k_mean) a.k_mean = view_of("k_mean", *k_mean, DType::f32);
  if (invalid_slots) a.invalid_slots = view_of("invalid_slots", *invalid_slots, DType::i32);
  a.mode = parse_mode(mode);
  a.rotate_k = rotate;
  RunOptions options;
  options.stream = reinterpret_cast<void*>(stream);
  run_released(where, [&] { return write_kv(a, options); });
}

}  // namespace

void bind_mx(nb::module_& m) {
  m.def(
      "canonical_type",
      [](const std::string& type) {
        return std::string(name_of(parse_element_type("type", type)));
      },
      nb::arg("type"));
  m.def(
      "element_bits",
      [](const std::string& type) { return bits_of(parse_element_type("type", type)); },
      nb::arg("type"));
  m.def("quantized_shapes", &quantized_shapes, nb::arg("shape"), nb::arg("format"),
        nb::arg("axis"));
  m.def("quantize", &quantize_array, nb::arg("x"), nb::arg("x_type"), nb::arg("data"),
        nb::arg("scales"), nb::arg("format"), nb::arg("axis"), nb::arg("mode"), nb::arg("stream"));
  m.def("dequantize", &dequantize_array, nb::arg("data"), nb::arg("format"), nb::arg("scales"),
        nb::arg("axis"), nb::arg("out"), nb::arg("out_type"), nb::arg("stream"));
  m.def("quantize_keys", &quantize_keys_array, nb::arg("k"), nb::arg("k_type"), nb::arg("data"),
        nb::arg("scales"), nb::arg("format"), nb::arg("mode"), nb::arg("rotate"),
        nb::arg("k_mean").none(), nb::arg("kv_len").none(), nb::arg("stream"));
  m.def("write_kv", &write_kv_arrays, nb::arg("k"), nb::arg("k_type"), nb::arg("v"),
        nb::arg("v_type"), nb::arg("k_cache"), nb::arg("k_cache_type"), nb::arg("v_cache"),
        nb::arg("v_cache_type"), nb::arg("slot_mapping"), nb::arg("slot_mapping_type"),
        nb::arg("k_scales").none(), nb::arg("v_scales").none(), nb::arg("k_mean").none(),
        nb::arg("invalid_slots").none(), nb::arg("mode"), nb::arg("rotate"), nb::arg("stream"));
}

}  // namespace mxattn::python
