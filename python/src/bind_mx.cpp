// MX quantization of whole tensors, and its inverse.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "mxattn/mx.h"

namespace mxattn::python {

namespace {

ScaleMode parse_mode(const std::string& mode) {
  if (mode == "floor") return ScaleMode::floor;
  if (mode == "rceil") return ScaleMode::rceil;
  throw nb::value_error(("mode must be 'floor' or 'rceil', found '" + mode + "'").c_str());
}

void require_host(std::string_view name, int device_type, int device_id) {
  if (placement_of(device_type, device_id, name).on_gpu) {
    raise_if_failed(Status::unsupported(std::string(name) +
                                        ": MX quantization runs on the host; pass host memory"));
  }
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
                    const std::string& mode) {
  require_host("x", src.device_type(), src.device_id());
  require_host("data", data.device_type(), data.device_id());
  require_host("scales", scales.device_type(), scales.device_id());
  const TensorView s = view_of("x", src, parse_element_type("x", src_type));
  const TensorView d = view_of("data", data, parse_element_type("format", format));
  const TensorView sc = view_of("scales", scales, DType::e8m0);
  const int a = resolve_axis(axis, src.ndim());
  const ScaleMode m = parse_mode(mode);
  Status status;
  {
    nb::gil_scoped_release released;
    status = quantize(s, d, sc, a, m);
  }
  raise_if_failed(status);
}

void dequantize_array(const InputArray& data, const std::string& format, const InputArray& scales,
                      int64_t axis, const OutputArray& dst, const std::string& dst_type) {
  require_host("data", data.device_type(), data.device_id());
  require_host("scales", scales.device_type(), scales.device_id());
  require_host("out", dst.device_type(), dst.device_id());
  const TensorView d = view_of("data", data, parse_element_type("format", format));
  const TensorView sc = view_of("scales", scales, DType::e8m0);
  const TensorView o = view_of("out", dst, parse_element_type("dtype", dst_type));
  const int a = resolve_axis(axis, dst.ndim());
  Status status;
  {
    nb::gil_scoped_release released;
    status = dequantize(d, sc, a, o);
  }
  raise_if_failed(status);
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
        nb::arg("scales"), nb::arg("format"), nb::arg("axis"), nb::arg("mode"));
  m.def("dequantize", &dequantize_array, nb::arg("data"), nb::arg("format"), nb::arg("scales"),
        nb::arg("axis"), nb::arg("out"), nb::arg("out_type"));
}

}  // namespace mxattn::python
