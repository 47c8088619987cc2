#include "call_args.h"

#include <string_view>

namespace mxattn::python {

namespace {

bool is_metadata(std::string_view name) {
  return name == "kv_len" || name == "prefix_offset" || name == "block_table" ||
         name == "row_ptr" || name == "col_idx" || name == "cu_seqlens_q";
}

Causal parse_causal(const std::string& s) {
  if (s == "none") return Causal::none;
  if (s == "top_left") return Causal::top_left;
  if (s == "bottom_right") return Causal::bottom_right;
  if (s == "prefix") return Causal::prefix;
  throw nb::value_error(
      ("causal must be None, 'top_left', 'bottom_right' or 'prefix', found '" + s + "'").c_str());
}

VScaleAxis parse_v_scale_axis(const std::string& s) {
  if (s == "head_dim") return VScaleAxis::head_dim;
  if (s == "keys") return VScaleAxis::keys;
  throw nb::value_error(("v_scale_axis must be 'head_dim' or 'keys', found '" + s + "'").c_str());
}

}  // namespace

TensorView& CallArgs::slot(const std::string& name, bool output) {
  AttentionArgs& a = args_;
  const struct {
    std::string_view name;
    TensorView* view;
    bool output;
  } slots[] = {{"q", &a.q, false},
               {"k", &a.k, false},
               {"v", &a.v, false},
               {"q_scales", &a.q_scales, false},
               {"k_scales", &a.k_scales, false},
               {"v_scales", &a.v_scales, false},
               {"k_mean", &a.k_mean, false},
               {"kv_len", &a.kv_len, false},
               {"prefix_offset", &a.prefix_offset, false},
               {"block_table", &a.paged.block_table, false},
               {"row_ptr", &a.sparse.row_ptr, false},
               {"col_idx", &a.sparse.col_idx, false},
               {"o", &a.o, true},
               {"lse", &a.lse, true},
               {"partial_o", &a.split.partial_o, true},
               {"partial_lse", &a.split.partial_lse, true},
               {"counts", &a.split.counts, true}};
  for (const auto& s : slots) {
    if (s.name == name && s.output == output) return *s.view;
  }
  if (name == "cu_seqlens_q" && !output) return cu_seqlens_q_;
  throw nb::value_error(
      ("no " + std::string(output ? "output" : "input") + " tensor named '" + name + "'").c_str());
}

void CallArgs::place(const std::string& name, Placement where, bool metadata) {
  if (metadata) {
    if (where.on_gpu) {
      throw nb::value_error((name + " is on " + where.describe() +
                             " but is read on the host (validation and planning read it): pass "
                             "host memory")
                                .c_str());
    }
    return;
  }
  if (!placement_) {
    placement_ = where;
    placement_source_ = name;
    return;
  }
  if (!(*placement_ == where)) {
    throw nb::value_error((name + " is on " + where.describe() + " but " + placement_source_ +
                           " is on " + placement_->describe() +
                           ": every tensor of a call must "
                           "live on the same device")
                              .c_str());
  }
}

RaggedArgs CallArgs::ragged_args() const {
  const AttentionArgs& a = args_;
  RaggedArgs r;
  r.q = a.q;
  r.q_scales = a.q_scales;
  r.cu_seqlens_q = cu_seqlens_q_;
  r.seq_lens = a.kv_len;
  r.k = a.k;
  r.v = a.v;
  r.k_scales = a.k_scales;
  r.v_scales = a.v_scales;
  r.v_scale_axis = a.v_scale_axis;
  r.paged = a.paged;
  r.o = a.o;
  r.lse = a.lse;
  r.causal = a.causal;
  r.prefix_offset = a.prefix_offset;
  r.window = a.window;
  r.scale = a.scale;
  r.k_mean = a.k_mean;
  r.split = a.split;
  return r;
}

void CallArgs::set_input(const std::string& name, const InputArray& array,
                         const std::string& type) {
  TensorView& view = slot(name, false);
  const TensorView converted = view_of(name, array, parse_element_type(name, type));
  place(name, placement_of(array, name), is_metadata(name));
  view = converted;
  inputs_.insert_or_assign(name, array);
}

void CallArgs::set_output(const std::string& name, const OutputArray& array,
                          const std::string& type) {
  TensorView& view = slot(name, true);
  const TensorView converted = view_of(name, array, parse_element_type(name, type));
  place(name, placement_of(array, name), false);
  view = converted;
  outputs_.insert_or_assign(name, array);
}

void CallArgs::set_options(const std::string& causal, int64_t window, std::optional<float> scale,
                           int64_t page_size, int32_t block_q, int32_t block_k,
                           const std::string& v_scale_axis, int32_t split_kv, int32_t tile_m,
                           int32_t tile_n, bool early_exit) {
  args_.causal = parse_causal(causal);
  args_.window = window;
  args_.scale = scale;
  args_.paged.page_size = page_size;
  args_.sparse.block_q = block_q;
  args_.sparse.block_k = block_k;
  args_.v_scale_axis = parse_v_scale_axis(v_scale_axis);
  args_.split.split_kv = split_kv;
  args_.split.tile_m = tile_m;
  args_.split.tile_n = tile_n;
  args_.split.early_exit = early_exit;
}

}  // namespace mxattn::python
