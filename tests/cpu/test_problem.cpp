#include "cpu/test_problem.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "base/index.h"
#include "core/plan.h"
#include "core/problem.h"
#include "core/validate.h"
#include "cpu/engines.h"

namespace mxattn::test {
namespace {

const char* causal_name(Causal c) {
  switch (c) {
    case Causal::top_left:
      return "top_left";
    case Causal::bottom_right:
      return "bottom_right";
    case Causal::prefix:
      return "prefix";
    default:
      return "none";
  }
}

std::string join(const std::vector<int32_t>& values) {
  std::ostringstream s;
  s << '[';
  for (size_t n = 0; n < values.size(); ++n) s << (n ? "," : "") << values[n];
  s << ']';
  return s.str();
}

// Shrinks the sizes until the f64 reference stays cheap: rows first, then batch, heads and keys.
void fit_work(Spec& s, int64_t max_work) {
  while (work_of(s) > max_work) {
    if (s.seq_q > 8) {
      s.seq_q = (s.seq_q + 1) / 2;
    } else if (s.batch > 1) {
      --s.batch;
    } else if (s.heads_q > s.heads_kv) {
      s.heads_q -= s.heads_kv;
    } else if (s.heads_kv > 1) {
      s.heads_q = --s.heads_kv;
    } else if (s.seq_q > 1) {
      --s.seq_q;
    } else if (s.seq_k > (s.paged() ? s.page_size : 1)) {
      s.seq_k = s.paged() ? s.seq_k - s.page_size : (s.seq_k + 1) / 2;
    } else {
      break;
    }
  }
}

DType random_input_type(Rng& rng, const SpecRange& range) {
  if (range.bf16_inputs) return DType::bf16;
  std::vector<DType> types = {DType::f32};
  if (range.low_precision) types.insert(types.end(), {DType::f16, DType::bf16});
  if (range.mx) {
    types.insert(types.end(), {DType::e4m3, DType::e5m2, DType::e2m3, DType::e3m2, DType::e2m1});
  }
  return rng.pick(types);
}

int64_t offset5(const TensorView& v, int64_t i0, int64_t i1, int64_t i2, int64_t i3, int64_t i4) {
  return i0 * v.stride[0] + i1 * v.stride[1] + i2 * v.stride[2] + i3 * v.stride[3] +
         i4 * v.stride[4];
}

}  // namespace

int64_t work_of(const Spec& s) {
  return s.batch * s.heads_q * s.seq_q * s.seq_k * (s.dim_qk + s.dim_v);
}

std::string Spec::describe() const {
  std::ostringstream s;
  s << "seed=" << seed << " B=" << batch << " Sq=" << seq_q << " Sk=" << seq_k << " Hq=" << heads_q
    << " Hkv=" << heads_kv << " Dqk=" << dim_qk << " Dv=" << dim_v << " q=" << name_of(q_type)
    << " k=" << name_of(k_type) << " v=" << name_of(v_type) << " o=" << name_of(o_type)
    << " v_axis=" << (v_axis == VScaleAxis::keys ? "keys" : "head_dim")
    << " scale_mode=" << (scale_mode == ScaleMode::rceil ? "rceil" : "floor")
    << " causal=" << causal_name(causal) << " prefix=" << join(prefix_offset)
    << " kv_len=" << join(kv_len) << " window=" << window
    << " scale=" << (scale ? std::to_string(*scale) : "default") << " lse=" << lse
    << " q_gain=" << q_gain << " k_outlier=" << k_outlier << " hadamard=" << hadamard
    << " smooth_k=" << smooth_k << " k_mean=" << k_mean << " page_size=" << page_size
    << " spare_pages=" << spare_pages << " block_q=" << block_q << " block_k=" << block_k
    << " density=" << sparse_density << " fixed_count=" << sparse_fixed_count
    << " sparse_per_b=" << sparse_per_batch << " sparse_per_h=" << sparse_per_head
    << " split_kv=" << split_kv << " auto_target=" << auto_target << " tile_m=" << tile_m
    << " tile_n=" << tile_n << " early_exit=" << early_exit << " partials=" << partials
    << " counts=" << counts << " strided=" << strided << " kv_head_major=" << kv_head_major
    << " poison_padding=" << poison_padding << " partition=" << api::name_of(partition);
  return s.str();
}

void draw_masks(Rng& rng, double kv_len_chance, int64_t prefix_min, Spec& s) {
  if (rng.chance(kv_len_chance)) {
    for (int64_t b = 0; b < s.batch; ++b) {
      const double r = rng.real(0.0, 1.0);
      s.kv_len.push_back(int32_t(r < 0.1 ? 0 : r < 0.3 ? s.seq_k : rng.uniform(0, s.seq_k)));
    }
  }
  s.causal =
      rng.pick<Causal>({Causal::none, Causal::top_left, Causal::bottom_right, Causal::prefix});
  if (s.causal == Causal::prefix) {
    for (int64_t b = 0; b < s.batch; ++b)
      s.prefix_offset.push_back(int32_t(rng.uniform(prefix_min, s.seq_k)));
  }
  if (rng.chance(0.3)) s.window = rng.uniform(0, s.seq_k);
}

Spec random_spec(uint64_t seed, const SpecRange& range) {
  Rng rng(seed);
  Spec s;
  s.seed = seed;
  s.batch = rng.uniform(1, range.max_batch);
  s.heads_kv = rng.uniform(1, range.max_heads_kv);
  s.heads_q = s.heads_kv * rng.uniform(1, range.max_group);
  s.q_type = random_input_type(rng, range);
  s.k_type = random_input_type(rng, range);
  s.v_type = random_input_type(rng, range);
  s.o_type =
      range.low_precision ? rng.pick<DType>({DType::f32, DType::f16, DType::bf16}) : DType::f32;
  const bool qk_mx = is_mx(s.q_type) || is_mx(s.k_type);
  s.dim_qk = qk_mx ? rng.pick<int64_t>({32, 64}) : rng.pick<int64_t>({4, 8, 13, 16, 32, 40, 64});
  s.dim_v =
      is_mx(s.v_type) ? rng.pick<int64_t>({32, 64, 96}) : rng.pick<int64_t>({4, 8, 16, 24, 32, 64});
  if (is_mx(s.v_type) && rng.chance(0.5)) s.v_axis = VScaleAxis::keys;
  if (rng.chance(0.5)) s.scale_mode = ScaleMode::rceil;

  s.seq_q = rng.chance(0.3) ? 1 : rng.uniform(1, range.max_seq_q);
  if (range.paged && rng.chance(0.3)) {
    s.page_size = s.v_axis == VScaleAxis::keys ? rng.pick<int64_t>({32, 64})
                                               : rng.pick<int64_t>({16, 32, 64});
    s.seq_k = s.page_size * rng.uniform(1, std::max<int64_t>(1, range.max_seq_k / s.page_size));
    s.spare_pages = rng.uniform(0, 2);
  } else {
    s.seq_k = rng.uniform(1, range.max_seq_k);
  }
  fit_work(s, range.max_work);

  if (range.masks) draw_masks(rng, 0.5, 0, s);
  if (rng.chance(0.2)) s.scale = float(rng.real(0.05, 0.5));
  s.lse = rng.chance(0.8);
  s.k_mean = range.k_mean && rng.chance(0.2);

  if (range.sparse && rng.chance(0.25)) {
    s.block_q = rng.pick<int32_t>({16, 32, 64});
    s.block_k = rng.pick<int32_t>({16, 32, 64});
    s.sparse_density = rng.chance(0.2) ? 1.0 : rng.real(0.0, 1.0);
    s.sparse_per_batch = rng.chance(0.5);
    s.sparse_per_head = rng.chance(0.5);
  }
  if (range.split) {
    const double r = rng.real(0.0, 1.0);
    s.split_kv = r < 0.5 ? 1 : r < 0.75 ? int32_t(rng.uniform(2, 8)) : 0;
    // The engines' own auto target splits only long runs; a small one splits these short ones.
    if (s.split_kv == 0 && rng.chance(0.5)) s.auto_target = int32_t(rng.uniform(1, 4));
    s.tile_m = rng.pick<int32_t>({0, 1, 4, 16, 64});
    s.tile_n = rng.pick<int32_t>({0, 8, 16, 32, 64});
    s.early_exit = rng.chance(0.3);
    s.partials = rng.chance(0.4);
    s.counts = rng.chance(0.4);
  }
  s.strided = range.strided && rng.chance(0.4);
  s.poison_padding = rng.chance(0.7);
  // A larger gain makes some softmaxes peaked, where the max subtraction matters.
  if (rng.chance(0.3)) s.q_gain = 3.0f;
  return s;
}

TestProblem::TestProblem(const Spec& spec) : TestProblem(spec, generate_data(spec)) {}

TestProblem::TestProblem(const Spec& spec, ProblemData data) : spec_(spec) {
  if (Status st = workload::Problem::build(spec, std::move(data), &problem_); !st) {
    throw std::runtime_error("test problem: " + st.message());
  }
  if (!spec.partials) return;
  // The plan decides how many slots auto needs; without a valid problem, the most auto may use.
  core::Problem p;
  if (core::validate_problem(problem_.args(), &p)) {
    problem_.add_partials(core::partial_slots(p, api::split_params(p, spec.partition)));
  } else {
    problem_.add_partials(spec.split_kv > 0 ? spec.split_kv : core::SplitParams{}.max_splits);
  }
}

Status TestProblem::plan(api::EngineKind kind, core::Problem* p, core::SplitParams* split) const {
  if (Status st = core::validate_problem(problem_.args(), p); !st) return st;
  *split = api::split_params(*p, kind);
  return core::validate_partial_slots(problem_.args(), core::partial_slots(*p, *split));
}

Status TestProblem::run(Engine engine, int threads) {
  poison_outputs();
  if (engine == Engine::cpu_reference && !api::is_cpu(spec_.partition)) {
    core::Problem p;
    core::SplitParams split;
    if (Status st = plan(spec_.partition, &p, &split); !st) return st;
    cpu::run_reference(p, split);
    return Status::ok();
  }
  RunOptions options;
  options.engine = engine;
  options.threads = threads;
  return attention(problem_.args(), options);
}

Status TestProblem::run_fast_with(cpu::SimdIsa isa, int threads, cpu::RowTiles row_tiles) {
  poison_outputs();
  core::Problem p;
  core::SplitParams split;
  if (Status st = plan(api::EngineKind::cpu_fast, &p, &split); !st) return st;
  cpu::run_fast_with(isa, p, split, threads, row_tiles);
  return Status::ok();
}

Outputs TestProblem::outputs() const {
  const Spec& s = spec_;
  const AttentionArgs& a = problem_.args();
  Outputs out;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.seq_q; ++i)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t d = 0; d < s.dim_v; ++d)
          out.o.push_back(base::load_float(a.o, base::offset_of(a.o, b, i, h, d)));
  const auto rows = [&](const TensorView& v, std::vector<float>& dst) {
    if (!v.given()) return;
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i)
          dst.push_back(static_cast<const float*>(v.data)[base::offset_of(v, b, h, i)]);
  };
  rows(a.lse, out.lse);
  const TensorView& po = a.split.partial_o;
  const TensorView& pl = a.split.partial_lse;
  for (int64_t sl = 0; sl < slots(); ++sl) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t i = 0; i < s.seq_q; ++i)
        for (int64_t h = 0; h < s.heads_q; ++h)
          for (int64_t d = 0; d < s.dim_v; ++d)
            out.partial_o.push_back(
                static_cast<const float*>(po.data)[offset5(po, sl, b, i, h, d)]);
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i)
          out.partial_lse.push_back(
              static_cast<const float*>(pl.data)[base::offset_of(pl, sl, b, h, i)]);
  }
  const TensorView& counts = a.split.counts;
  if (counts.given()) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t h = 0; h < s.heads_q; ++h)
        for (int64_t i = 0; i < s.seq_q; ++i)
          out.counts.push_back(base::read_i32(counts, base::offset_of(counts, b, h, i)));
  }
  return out;
}

bool TestProblem::row_sees_nothing(int64_t b, int64_t h, int64_t i) const {
  const Spec& s = spec_;
  core::Visibility vis;
  vis.last = s.kv_len_of(b) - 1;
  vis.causal = s.causal != Causal::none;
  vis.offset = s.causal == Causal::bottom_right ? s.kv_len_of(b) - s.seq_q
               : s.causal == Causal::prefix     ? s.prefix_offset_of(b)
                                                : 0;
  vis.window = s.window;
  for (int64_t j = 0; j < s.seq_k; ++j) {
    if (!vis.visible(i, j)) continue;
    if (!s.sparse()) return false;
    const ProblemData& d = data();
    const int64_t slab =
        (s.sparse_per_batch ? b : 0) * d.row_ptr_shape[1] + (s.sparse_per_head ? h : 0);
    const int32_t* row_ptr = d.row_ptr.data() + slab * d.row_ptr_shape[2];
    const int32_t* cols = d.col_idx.data() + slab * d.col_idx_shape[2];
    const int64_t qb = i / s.block_q;
    if (std::find(cols + row_ptr[qb], cols + row_ptr[qb + 1], int32_t(j / s.block_k)) !=
        cols + row_ptr[qb + 1])
      return false;
  }
  return true;
}

}  // namespace mxattn::test
