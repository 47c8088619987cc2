#include "problem_flags.h"

#include <limits>

#include "npy.h"

namespace mxattn::tools {

void add_engine_flag(FlagParser& flags, Engine* engine) {
  flags.add_choice("engine", engine,
                   {{"auto", Engine::automatic},
                    {"cpu", Engine::cpu_fast},
                    {"reference", Engine::cpu_reference},
                    {"cuda", Engine::cuda}},
                   "engine (auto: the GPU if there is one and it runs the problem, else the fast "
                   "CPU engine)");
}
namespace {

std::vector<std::pair<std::string, DType>> input_formats() {
  return {{"f32", DType::f32},   {"f16", DType::f16},    {"bf16", DType::bf16},
          {"e4m3", DType::e4m3}, {"mxfp8", DType::e4m3}, {"e5m2", DType::e5m2},
          {"e2m3", DType::e2m3}, {"mxfp6", DType::e2m3}, {"e3m2", DType::e3m2},
          {"e2m1", DType::e2m1}, {"mxfp4", DType::e2m1}};
}

std::optional<std::vector<int32_t>> to_int32(const std::vector<int64_t>& values) {
  std::vector<int32_t> out;
  for (int64_t v : values) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      return std::nullopt;
    out.push_back(int32_t(v));
  }
  return out;
}

}  // namespace

ProblemFlags::ProblemFlags(FlagParser& flags, workload::Spec* spec)
    : spec_(spec),
      batch_(spec->batch),
      seq_q_(spec->seq_q),
      seq_k_(spec->seq_k),
      heads_q_(spec->heads_q),
      heads_kv_(spec->heads_kv),
      dim_qk_(spec->dim_qk),
      dim_v_(spec->dim_v),
      window_(spec->window),
      page_size_(spec->page_size),
      block_q_(spec->sparse() ? spec->block_q : 64),
      block_k_(spec->sparse() ? spec->block_k : 64),
      tile_m_(spec->tile_m),
      tile_n_(spec->tile_n),
      split_target_(spec->auto_target),
      sparse_density_(spec->sparse() ? spec->sparse_density : 0.0),
      seed_(int64_t(spec->seed)),
      split_kv_(spec->split_kv == 0 ? "auto" : std::to_string(spec->split_kv)) {
  workload::Spec& c = *spec;
  flags.add_int("batch", &batch_, "batch size B");
  flags.add_int("seq-len-q", &seq_q_, "query rows per sequence Sq");
  flags.add_int("seq-len-k", &seq_k_,
                "keys per sequence Sk (paged: the last page's padding is never a key)");
  flags.add_int("num-heads-q", &heads_q_, "query heads Hq");
  flags.add_int("num-heads-kv", &heads_kv_, "key/value heads Hkv (Hq % Hkv == 0; any ratio)");
  flags.add_int("head-dim-qk", &dim_qk_, "head dim of Q and K");
  flags.add_int("head-dim-v", &dim_v_, "head dim of V and O");
  flags.add_choice("causal", &c.causal,
                   {{"none", Causal::none},
                    {"top-left", Causal::top_left},
                    {"bottom-right", Causal::bottom_right},
                    {"prefix", Causal::prefix}},
                   "causal mask alignment (bare --causal: top-left)", false, "top-left");
  flags.add_int_list("prefix-offset", &prefix_offset_,
                     "per-batch causal offsets (implies --causal=prefix); one value for all");
  flags.add_int_list("kv-len", &kv_len_, "per-batch valid keys; one value for all (default Sk)");
  flags.add_int("window", &window_, "sliding window W (keys j >= hi(i) - W); negative: none");
  flags.add_string("split-kv", &split_kv_, "N|auto", "splits per query tile");
  flags.add_int("tile-m", &tile_m_, "query rows per tile (0: the engine's choice)");
  flags.add_int("tile-n", &tile_n_, "keys per key tile (0: the engine's choice)");
  flags.add_int("split-target", &split_target_,
                "--split-kv auto: key tiles per split (0: the engine's choice)");
  flags.add_bool("early-exit", &c.early_exit, "leave splits past the exact count unwritten");
  flags.add_bool("return-lse", &c.lse, "also compute the log-sum-exp");
  flags.add_choice("q-format", &c.q_type, input_formats(), "storage of Q");
  flags.add_choice("k-format", &c.k_type, input_formats(), "storage of K");
  flags.add_choice("v-format", &c.v_type, input_formats(), "storage of V");
  flags.add_choice("v-scale-axis", &c.v_axis,
                   {{"head-dim", VScaleAxis::head_dim}, {"keys", VScaleAxis::keys}},
                   "axis of V's MX blocks");
  flags.add_choice("scale-mode", &c.scale_mode,
                   {{"floor", ScaleMode::floor}, {"rceil", ScaleMode::rceil}},
                   "MX scale exponent rule");
  flags.add_choice("out-dtype", &c.o_type,
                   {{"f32", DType::f32}, {"f16", DType::f16}, {"bf16", DType::bf16}},
                   "storage of O");
  flags.add_double("sparse-density", &sparse_density_,
                   "block-sparse: share of key blocks listed per query block (0: dense)");
  flags.add_string("sparse-layout", &layout_path_, "FILE.npz",
                   "block-sparse layout from np.savez(FILE, row_ptr=..., col_idx=...): integer "
                   "arrays [Bx, Hx, query blocks + 1] and [Bx, Hx, nnz] (Bx 1 or B, Hx 1 or Hq) "
                   "or 1-D for one layout of every (b, h); blocks of --block-q x --block-k");
  flags.add_int("block-q", &block_q_, "sparse query block (power of two, 16..256)");
  flags.add_int("block-k", &block_k_, "sparse key block (power of two, 16..256)");
  flags.add_int("paged", &page_size_, "page size of a paged KV cache (0: dense)");
  flags.add_bool("hadamard", &c.hadamard,
                 "rotate Q and K by a normalized Walsh-Hadamard before quantizing");
  flags.add_bool("smooth-k", &c.smooth_k,
                 "subtract the mean key before quantizing (LSE corrected)");
  flags.add_int("seed", &seed_, "seed of the random inputs");
  flags.add_string("q", &q_path_, "FILE.npy", "Q from a file [B, Sq, Hq, Dqk] (sets the shapes)");
  flags.add_string("k", &k_path_, "FILE.npy", "K from a file [B, Sk, Hkv, Dqk]");
  flags.add_string("v", &v_path_, "FILE.npy", "V from a file [B, Sk, Hkv, Dv]");
}

std::optional<int> ProblemFlags::finish(const FlagParser& flags) {
  workload::Spec& c = *spec_;
  c.batch = batch_;
  c.seq_q = seq_q_;
  c.seq_k = seq_k_;
  c.heads_q = heads_q_;
  c.heads_kv = heads_kv_;
  c.dim_qk = dim_qk_;
  c.dim_v = dim_v_;
  c.window = window_;
  c.page_size = page_size_;
  c.tile_m = int32_t(tile_m_);
  c.tile_n = int32_t(tile_n_);
  if (split_target_ < 0 || split_target_ > 1'000'000)
    return flags.usage_error("--split-target must be in [0, 1000000] (0: the engine's choice)");
  c.auto_target = int32_t(split_target_);
  c.seed = uint64_t(seed_);
  if (split_kv_ == "auto") {
    c.split_kv = 0;
  } else {
    try {
      size_t used = 0;
      const long n = std::stol(split_kv_, &used);
      if (used != split_kv_.size() || n < 1 || n > 1024) throw std::out_of_range("split-kv");
      c.split_kv = int32_t(n);
    } catch (const std::exception&) {
      return flags.usage_error("--split-kv must be auto or a whole number in [1, 1024], not '" +
                               split_kv_ + "'");
    }
  }
  const std::optional<std::vector<int32_t>> prefix = to_int32(prefix_offset_),
                                            lens = to_int32(kv_len_);
  if (!prefix || !lens)
    return flags.usage_error("--prefix-offset and --kv-len values must fit in int32");
  c.prefix_offset = *prefix;
  c.kv_len = *lens;
  if (!c.prefix_offset.empty() && c.causal == Causal::none) c.causal = Causal::prefix;

  // Inputs from files set the shapes they carry.
  const struct {
    const std::string& path;
    base::HostTensor* file;
    const char* flag;
  } files[] = {{q_path_, &q_file_, "--q"}, {k_path_, &k_file_, "--k"}, {v_path_, &v_file_, "--v"}};
  const bool any = !q_path_.empty() || !k_path_.empty() || !v_path_.empty();
  for (const auto& f : files) {
    if (any && f.path.empty()) return flags.usage_error("--q, --k and --v come together");
    if (f.path.empty()) continue;
    if (Status st = read_npy(f.path, f.file); !st) {
      return flags.usage_error(std::string(f.flag) + ": " + st.message());
    }
    if (f.file->view().rank != 4)
      return flags.usage_error(std::string(f.flag) + " must be a rank-4 BSHD array");
  }
  if (any) {
    const TensorView &q = q_file_.view(), &k = k_file_.view(), &v = v_file_.view();
    c.batch = q.shape[0];
    c.seq_q = q.shape[1];
    c.heads_q = q.shape[2];
    c.dim_qk = q.shape[3];
    c.seq_k = k.shape[1];
    c.heads_kv = k.shape[2];
    c.dim_v = v.shape[3];
  }

  // A block-sparse layout from a file: row_ptr and col_idx, rank 3 or one layout for all (b, h).
  if (!layout_path_.empty()) {
    std::vector<std::pair<std::string, base::HostTensor>> arrays;
    if (Status st = read_npz(layout_path_, NpyRead::index, &arrays); !st) {
      return flags.usage_error("--sparse-layout: " + st.message());
    }
    base::HostTensor* targets[2] = {&row_ptr_file_, &col_idx_file_};
    const char* names[2] = {"row_ptr", "col_idx"};
    for (int i = 0; i < 2; ++i) {
      auto found = std::find_if(arrays.begin(), arrays.end(),
                                [&](const auto& entry) { return entry.first == names[i]; });
      if (found == arrays.end()) {
        std::string present;
        for (const auto& entry : arrays) present += (present.empty() ? "" : ", ") + entry.first;
        return flags.usage_error("--sparse-layout: " + layout_path_ + " has no array '" + names[i] +
                                 "' (it holds: " + (present.empty() ? "nothing" : present) + ")");
      }
      TensorView& v = found->second.view();
      if (v.rank == 1) {  // one layout for every (b, h): [1, 1, n], the same contiguous bytes
        const int64_t n = v.shape[0];
        v.rank = 3;
        v.shape[0] = v.shape[1] = 1;
        v.shape[2] = n;
        set_contiguous_strides(v);
      } else if (v.rank != 3) {
        return flags.usage_error("--sparse-layout: '" + std::string(names[i]) + "' has shape " +
                                 v.shape_string() + "; rank 3 [Bx, Hx, n] or rank 1 [n]");
      }
      *targets[i] = std::move(found->second);
    }
  }

  // Block-sparse: a random layout of the given density, or the layout from a file.
  c.block_q = c.block_k = 0;
  if (sparse_density_ > 0 && !layout_path_.empty()) {
    return flags.usage_error(
        "a given sparse layout and a random one (sparse density) are alternatives; give one");
  }
  if (sparse_density_ > 0 || !layout_path_.empty()) {
    if (block_q_ < 1 || block_k_ < 1 || block_q_ > 1 << 30 || block_k_ > 1 << 30) {
      return flags.usage_error("--block-q and --block-k must be powers of two in [16, 256]");
    }
    c.block_q = int32_t(block_q_);
    c.block_k = int32_t(block_k_);
    c.sparse_density = sparse_density_;
  }
  return std::nullopt;
}

workload::Inputs ProblemFlags::inputs() const {
  workload::Inputs in;
  if (q_file_.view().given()) in = {&q_file_.view(), &k_file_.view(), &v_file_.view()};
  if (row_ptr_file_.view().given()) {
    in.row_ptr = &row_ptr_file_.view();
    in.col_idx = &col_idx_file_.view();
  }
  return in;
}

}  // namespace mxattn::tools
