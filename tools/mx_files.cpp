#include "mx_files.h"

#include <fstream>
#include <iterator>

#include "cli.h"
#include "literal.h"

namespace mxattn::tools {

int64_t MxLayout::row_elements() const {
  const int64_t group = pack_group(format);
  return (shape.back() + group - 1) / group * group;
}

std::vector<int64_t> MxLayout::data_file_shape() const {
  std::vector<int64_t> bytes_shape = shape;
  bytes_shape.back() = row_elements() * bits_of(format) / 8;
  return bytes_shape;
}

std::vector<int64_t> MxLayout::scales_shape() const {
  std::vector<int64_t> s = shape;
  s[size_t(axis)] = (s[size_t(axis)] + kMxBlock - 1) / kMxBlock;
  return s;
}

TensorView MxLayout::data_view(void* data, int64_t bytes) const {
  TensorView v;
  v.data = data;
  v.dtype = format;
  v.rank = int(shape.size());
  int64_t stride = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.shape[i] = shape[size_t(i)];
    v.stride[i] = stride;
    stride *= i == v.rank - 1 ? row_elements() : shape[size_t(i)];
  }
  v.bytes = bytes;
  return v;
}

TensorView MxLayout::scales_view(void* data, int64_t bytes) const {
  TensorView v;
  v.data = data;
  v.dtype = DType::e8m0;
  v.rank = int(shape.size());
  const std::vector<int64_t> s = scales_shape();
  for (int i = 0; i < v.rank; ++i) v.shape[i] = s[size_t(i)];
  set_contiguous_strides(v);
  v.bytes = bytes;
  return v;
}

std::string data_path(const std::string& prefix) {
  return prefix + ".data.npy";
}
std::string scales_path(const std::string& prefix) {
  return prefix + ".scales.npy";
}
std::string metadata_path(const std::string& prefix) {
  return prefix + ".json";
}

std::string_view scale_mode_name(ScaleMode mode) {
  return mode == ScaleMode::floor ? "floor" : "rceil";
}

Status write_metadata(const std::string& prefix, const MxLayout& layout) {
  std::ofstream out(metadata_path(prefix));
  out << "{\"format\": \"" << name_of(layout.format) << "\", \"axis\": " << layout.axis
      << ", \"shape\": " << shape_text(layout.shape) << ", \"scale_mode\": \""
      << scale_mode_name(layout.mode) << "\"}\n";
  if (!out) return Status::invalid(metadata_path(prefix) + ": cannot write");
  return Status::ok();
}

Status read_metadata(const std::string& prefix, MxLayout* layout) {
  const std::string path = metadata_path(prefix);
  std::ifstream in(path);
  if (!in) return Status::invalid(path + ": cannot open for reading");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string error;
  const std::optional<LiteralDict> dict = parse_literal_dict(text, &error);
  if (!dict) return Status::invalid(path + ": cannot parse (" + error + ")");
  const std::optional<std::string> format = dict_string(*dict, "format");
  const std::optional<int64_t> axis = dict_int(*dict, "axis");
  const std::optional<std::vector<int64_t>> shape = dict_ints(*dict, "shape");
  const std::optional<std::string> mode = dict_string(*dict, "scale_mode");
  if (!format || !axis || !shape || !mode) {
    return Status::invalid(path + ": needs \"format\", \"axis\", \"shape\" and \"scale_mode\"");
  }
  const std::optional<DType> type = parse_dtype(*format);
  if (!type || !is_mx(*type))
    return Status::invalid(path + ": unknown MX format '" + *format + "'");
  if (shape->empty() || shape->size() > size_t(kMaxRank)) {
    return Status::invalid(path + ": shape " + shape_text(*shape) + " has an unsupported rank");
  }
  for (int64_t d : *shape) {
    if (d < 0) return Status::invalid(path + ": shape " + shape_text(*shape) + " is negative");
  }
  if (*axis < 0 || *axis >= int64_t(shape->size())) {
    return Status::invalid(path + ": axis " + std::to_string(*axis) + " is outside the shape " +
                           shape_text(*shape));
  }
  if (*mode != "floor" && *mode != "rceil") {
    return Status::invalid(path + ": unknown scale_mode '" + *mode + "'");
  }
  layout->format = *type;
  layout->axis = int(*axis);
  layout->shape = *shape;
  layout->mode = *mode == "floor" ? ScaleMode::floor : ScaleMode::rceil;
  return Status::ok();
}

}  // namespace mxattn::tools
