// `mxattn quant` and `mxattn dequant`: a .npy tensor to the MX files of mx_files.h and back.
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "core/metrics.h"
#include "mx_files.h"
#include "npy.h"
#include "verbs.h"

namespace mxattn::tools {
namespace {

int failure(std::string_view verb, const Status& status) {
  std::cerr << "mxattn " << verb << ": " << status.message() << "\n";
  return kExitFailure;
}

std::vector<int64_t> shape_of(const TensorView& v) {
  return {v.shape, v.shape + v.rank};
}

const std::vector<std::pair<std::string, DType>> kFormatWords = {
    {"e4m3", DType::e4m3}, {"e5m2", DType::e5m2},  {"e2m3", DType::e2m3},  {"e3m2", DType::e3m2},
    {"e2m1", DType::e2m1}, {"mxfp8", DType::e4m3}, {"mxfp6", DType::e2m3}, {"mxfp4", DType::e2m1}};

}  // namespace

int verb_quant(int argc, char** argv) {
  std::string input, prefix;
  DType format = DType::e4m3;
  ScaleMode mode = ScaleMode::floor;
  int64_t axis = -1;
  FlagParser flags(
      "quant", "IN.npy --format F --out PREFIX [flags]",
      "Quantizes IN.npy (f32, f16 or bf16) in blocks of 32 along one axis and writes\n"
      "PREFIX.data.npy (u8 codes, FP6/FP4 packed along the last axis), PREFIX.scales.npy\n"
      "(u8 E8M0) and PREFIX.json, then prints the quantization error.");
  flags.add_positional("IN.npy", &input, "the tensor to quantize");
  flags.add_choice("format", &format, kFormatWords,
                   "element type (mxfp8 = e4m3, mxfp6 = e2m3, mxfp4 = e2m1)", true);
  flags.add_choice("scale-mode", &mode, {{"floor", ScaleMode::floor}, {"rceil", ScaleMode::rceil}},
                   "block exponent: floor (OCP, saturates) or rceil (never saturates)");
  flags.add_int("axis", &axis, "block axis; negative counts from the end");
  flags.add_string("out", &prefix, "PREFIX", "prefix of the files written", true);
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;

  base::HostTensor src;
  if (Status s = read_npy(input, &src); !s) return failure("quant", s);
  if (!is_plain_float(src.view().dtype)) {
    return failure("quant", Status::invalid(input + " holds " + npy_type_name(src.view().dtype) +
                                            "; quant reads f32, f16 or bf16"));
  }
  const int rank = src.view().rank;
  if (axis < -rank || axis >= rank) {
    return flags.usage_error("--axis " + std::to_string(axis) + " is outside [" +
                             std::to_string(-rank) + ", " + std::to_string(rank) + ") for shape " +
                             src.view().shape_string());
  }
  MxLayout layout;
  layout.format = format;
  layout.axis = int(axis < 0 ? axis + rank : axis);
  layout.shape = shape_of(src.view());
  layout.mode = mode;

  base::HostTensor data(DType::e8m0, layout.data_file_shape());
  base::HostTensor scales(DType::e8m0, layout.scales_shape());
  const TensorView data_view = layout.data_view(data.view().data, data.bytes());
  const TensorView scales_view = layout.scales_view(scales.view().data, scales.bytes());
  if (Status s = quantize(src.view(), data_view, scales_view, layout.axis, mode); !s) {
    return failure("quant", s);
  }
  base::HostTensor restored(DType::f32, layout.shape);
  if (Status s = dequantize(data_view, scales_view, layout.axis, restored.view()); !s) {
    return failure("quant", s);
  }
  for (const Status& s :
       {write_npy(data_path(prefix), data.view()), write_npy(scales_path(prefix), scales.view()),
        write_metadata(prefix, layout)}) {
    if (!s) return failure("quant", s);
  }

  core::ErrorAccumulator error;
  for (int64_t i = 0; i < src.numel(); ++i) {
    error.add(base::load_float(src.view(), i), restored.data<float>()[i]);
  }
  const core::ErrorMetrics m = error.result();
  const int64_t stored = data.bytes() + scales.bytes();
  std::printf("%s %s %s -> %s along axis %d (%s)\n", input.c_str(),
              std::string(name_of(src.view().dtype)).c_str(), src.view().shape_string().c_str(),
              std::string(name_of(format)).c_str(), layout.axis,
              std::string(scale_mode_name(mode)).c_str());
  std::printf("wrote %s %s, %s %s, %s\n", data_path(prefix).c_str(),
              data.view().shape_string().c_str(), scales_path(prefix).c_str(),
              scales.view().shape_string().c_str(), metadata_path(prefix).c_str());
  std::printf("stored %lld bytes (%.5f per element)\n", static_cast<long long>(stored),
              src.numel() > 0 ? double(stored) / double(src.numel()) : 0.0);
  std::printf("error: max abs %.6g, rel L2 %.6g, cosine %.9f, non-finite mismatches %lld\n",
              m.max_abs, m.rel_l2, m.cosine, static_cast<long long>(m.mismatched_nonfinite));
  return kExitOk;
}

int verb_dequant(int argc, char** argv) {
  std::string prefix, output;
  DType dtype = DType::f32;
  FlagParser flags("dequant", "PREFIX --out OUT.npy [flags]",
                   "Reads PREFIX.data.npy, PREFIX.scales.npy and PREFIX.json as written by quant\n"
                   "and writes the exactly dequantized tensor.");
  flags.add_positional("PREFIX", &prefix, "the prefix given to quant --out");
  flags.add_string("out", &output, "OUT.npy", "the .npy file to write", true);
  flags.add_choice("dtype", &dtype,
                   {{"f32", DType::f32}, {"f16", DType::f16}, {"bf16", DType::bf16}},
                   "element type of OUT.npy");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;

  MxLayout layout;
  if (Status s = read_metadata(prefix, &layout); !s) return failure("dequant", s);
  base::HostTensor data, scales;
  if (Status s = read_npy(data_path(prefix), &data); !s) return failure("dequant", s);
  if (Status s = read_npy(scales_path(prefix), &scales); !s) return failure("dequant", s);
  const std::pair<const base::HostTensor*, std::vector<int64_t>> expected[] = {
      {&data, layout.data_file_shape()}, {&scales, layout.scales_shape()}};
  for (const auto& [file, shape] : expected) {
    if (file->view().dtype != DType::e8m0 || shape_of(file->view()) != shape) {
      return failure(
          "dequant",
          Status::invalid((file == &data ? data_path(prefix) : scales_path(prefix)) +
                          " must be u8 " + shape_text(shape) + " for " + metadata_path(prefix) +
                          ", found " + npy_type_name(file->view().dtype) + " " +
                          file->view().shape_string()));
    }
  }
  base::HostTensor dst(dtype, layout.shape);
  if (Status s = dequantize(layout.data_view(data.view().data, data.bytes()),
                            layout.scales_view(scales.view().data, scales.bytes()), layout.axis,
                            dst.view());
      !s) {
    return failure("dequant", s);
  }
  if (Status s = write_npy(output, dst.view()); !s) return failure("dequant", s);
  std::printf("wrote %s %s %s\n", output.c_str(), std::string(name_of(dtype)).c_str(),
              dst.view().shape_string().c_str());
  return kExitOk;
}

}  // namespace mxattn::tools
