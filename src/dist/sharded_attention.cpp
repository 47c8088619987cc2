// The three steps of sequence-parallel attention: the forward all-to-all (gather_heads), attention
// on the rank's heads (run_local_attention), the reverse all-to-all (scatter_sequence).
#include <chrono>
#include <vector>

#include "base/host_tensor.h"
#include "dist/agreement.h"
#include "dist/exchange.h"
#include "dist/gathered.h"
#include "dist/grid.h"
#include "dist/send_quantize.h"
#include "mxattn/dist.h"

namespace mxattn::dist {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::vector<int64_t> shape_of(const TensorView& v) {
  return std::vector<int64_t>(v.shape, v.shape + v.rank);
}

// A new contiguous tensor in the communicator's memory.
Status allocate_view(Communicator& comm, DType dtype, const std::vector<int64_t>& shape,
                     Buffer* buffer, TensorView* view) {
  TensorView v;
  v.dtype = dtype;
  v.rank = int(shape.size());
  for (int i = 0; i < v.rank; ++i) v.shape[i] = shape[size_t(i)];
  set_contiguous_strides(v);
  v.bytes = bytes_needed(v).value_or(0);
  if (Status st = Buffer::allocate(comm, v.bytes, buffer); !st) return st;
  v.data = buffer->data();
  *view = v;
  return Status::ok();
}

// Heads [first, first + count) of a per-head int32 layout view [Bx, Hq, n]; broadcast views (and
// views validation will refuse) pass unchanged.
TensorView narrow_heads(const TensorView& v, int64_t heads_q, int64_t first, int64_t count) {
  if (v.rank < 2 || v.shape[1] != heads_q || heads_q == 1) return v;
  TensorView n = v;
  const int64_t skipped = first * v.stride[1];
  n.data = static_cast<int32_t*>(v.data) + skipped;
  n.shape[1] = count;
  n.bytes = v.bytes - skipped * int64_t(sizeof(int32_t));
  return n;
}

// The local problem's buffers and arguments: shapes from the geometry, options and metadata from
// the shard.
Status build_local_problem(Communicator& comm, const AttentionArgs& shard, GatheredHeads::Impl& g) {
  const Geometry& geo = g.geometry;
  const ShardRecord& c = geo.common;
  const int64_t B = c.batch, Sq = geo.seq_q(), Sk = geo.seq_k();
  const int64_t n = g.heads.q_count, kv = g.heads.kv_count;
  AttentionArgs& a = g.args;
  a = shard;
  a.q_scales = a.k_scales = a.v_scales = a.lse = a.k_mean = TensorView{};
  const auto alloc = [&](DType t, const std::vector<int64_t>& shape, Buffer* b, TensorView* v) {
    return allocate_view(comm, t, shape, b, v);
  };
  if (Status st = alloc(geo.q_type(), {B, Sq, n, c.dim_qk}, &g.q, &a.q); !st) return st;
  if (Status st = alloc(geo.k_type(), {B, Sk, kv, c.dim_qk}, &g.k, &a.k); !st) return st;
  if (Status st = alloc(geo.v_type(), {B, Sk, kv, c.dim_v}, &g.v, &a.v); !st) return st;
  if (is_mx(geo.q_type())) {
    if (Status st = alloc(DType::e8m0, {B, Sq, n, c.dim_qk / kMxBlock}, &g.q_scales, &a.q_scales);
        !st) {
      return st;
    }
  }
  if (is_mx(geo.k_type())) {
    if (Status st = alloc(DType::e8m0, {B, Sk, kv, c.dim_qk / kMxBlock}, &g.k_scales, &a.k_scales);
        !st) {
      return st;
    }
  }
  if (is_mx(geo.v_type())) {
    const std::vector<int64_t> shape =
        geo.v_along_keys() ? std::vector<int64_t>{B, kv, (Sk + kMxBlock - 1) / kMxBlock, c.dim_v}
                           : std::vector<int64_t>{B, Sk, kv, c.dim_v / kMxBlock};
    if (Status st = alloc(DType::e8m0, shape, &g.v_scales, &a.v_scales); !st) return st;
  }
  a.v_scale_axis = geo.v_along_keys() ? VScaleAxis::keys : VScaleAxis::head_dim;
  if (Status st = alloc(geo.o_type(), {B, Sq, n, c.dim_v}, &g.o, &a.o); !st) return st;
  if (c.lse) {
    if (Status st = alloc(DType::f32, {B, n, Sq}, &g.lse, &a.lse); !st) return st;
  }
  if (c.k_mean) {
    if (Status st = alloc(DType::f32, {B, kv, c.dim_qk}, &g.k_mean, &a.k_mean); !st) return st;
  }
  a.sparse.row_ptr = narrow_heads(shard.sparse.row_ptr, c.heads_q, g.heads.q_first, n);
  a.sparse.col_idx = narrow_heads(shard.sparse.col_idx, c.heads_q, g.heads.q_first, n);
  g.shard_o = shard.o;
  g.shard_lse = shard.lse;
  return Status::ok();
}

// The mean keys of the rank's KV heads, from the whole k_mean every rank holds.
Status gather_k_mean(Communicator& comm, const TensorView& whole, const GatheredHeads::Impl& g) {
  const TensorView& local = g.args.k_mean;
  const Grid from{static_cast<std::byte*>(whole.data),
                  whole.shape[0],
                  1,
                  whole.shape[1],
                  whole.shape[2] * int64_t(sizeof(float)),
                  true};
  const Grid to{static_cast<std::byte*>(local.data),
                local.shape[0],
                1,
                local.shape[1],
                local.shape[2] * int64_t(sizeof(float)),
                true};
  std::vector<Copy2D> copies;
  for (const HeadRun& run : kv_head_runs(g.heads)) {
    append_box(&copies, from, {0, g.heads.kv_first + run.received_first}, to, {0, run.local_first},
               1, run.count);
  }
  if (Status st = comm.copy_2d(copies.data(), int64_t(copies.size())); !st) return st;
  return comm.synchronize();
}

// Per rank: its heads and how its KV heads spread from the distinct ones it receives.
struct HeadPlan {
  std::vector<HeadSlice> slices;
  std::vector<std::vector<HeadRun>> kv_runs;

  explicit HeadPlan(const Geometry& geo) {
    for (int r = 0; r < geo.ranks; ++r) {
      slices.push_back(geo.heads(r));
      kv_runs.push_back(kv_head_runs(slices.back()));
    }
  }
};

// Query-head tensors: rank `to` gets its Hq/P heads of every sender's rows.
Route query_route(const Grid& source, const Grid& target, const std::vector<Shard>& rows,
                  const HeadPlan& plan) {
  return {source, target, [&rows, &plan](int from, int to) {
            const HeadSlice& h = plan.slices[size_t(to)];
            const Shard& s = rows[size_t(from)];
            return Piece{{0, h.q_first}, s.length, h.q_count, s.offset, {{0, 0, h.q_count}}};
          }};
}

// KV-head tensors: rank `to` gets the distinct KV heads it reads, spread over its local heads.
Route kv_route(const Grid& source, const Grid& target, const std::vector<Shard>& rows,
               const HeadPlan& plan) {
  return {
      source, target, [&rows, &plan](int from, int to) {
        const HeadSlice& h = plan.slices[size_t(to)];
        const Shard& s = rows[size_t(from)];
        return Piece{{0, h.kv_first}, s.length, h.kv_distinct, s.offset, plan.kv_runs[size_t(to)]};
      }};
}

// Output tensors, back to the sequence: rank `to` gets its rows of every sender's heads.
Route output_route(const Grid& source, const Grid& target, const std::vector<Shard>& rows,
                   int64_t heads_per_rank) {
  return {source, target, [&rows, heads_per_rank](int from, int to) {
            const Shard& s = rows[size_t(to)];
            return Piece{{s.offset, 0},
                         s.length,
                         heads_per_rank,
                         0,
                         {{from * heads_per_rank, 0, heads_per_rank}}};
          }};
}

Status gather(Communicator& comm, const AttentionArgs& shard, const SendQuantization& sq,
              const Status& extra, GatheredHeads* out, ExchangeStats* stats) {
  auto impl = std::make_unique<GatheredHeads::Impl>();
  GatheredHeads::Impl& g = *impl;
  g.comm = &comm;
  const ShardRecord mine = describe_shard(comm, shard, sq, extra);
  if (Status st = agree_on_shards(comm, mine, &g.geometry); !st) return st;
  const Geometry& geo = g.geometry;
  g.heads = geo.heads(geo.rank);

  Status built = build_local_problem(comm, shard, g);
  if (built) built = validate(g.args);
  if (Status st = agree_on(comm, built); !st) return st;

  auto start = Clock::now();
  TravellingShard travelling;
  if (Status st = prepare_travelling_shard(comm, geo, shard, sq, &travelling); !st) return st;
  if (g.args.k_mean.given()) {
    if (Status st = gather_k_mean(comm, shard.k_mean, g); !st) return st;
  }
  stats->quantize_seconds += seconds_since(start);

  const HeadPlan plan(geo);
  std::vector<Shard> carried_blocks;
  for (const Shard& keys : geo.kv_shards) carried_blocks.push_back(carried_key_blocks(keys));
  const AttentionArgs& a = g.args;
  std::vector<Route> routes;
  routes.push_back(query_route(token_grid(travelling.q), token_grid(a.q), geo.q_shards, plan));
  routes.push_back(kv_route(token_grid(travelling.k), token_grid(a.k), geo.kv_shards, plan));
  routes.push_back(kv_route(token_grid(travelling.v), token_grid(a.v), geo.kv_shards, plan));
  if (a.q_scales.given()) {
    routes.push_back(
        query_route(token_grid(travelling.q_scales), token_grid(a.q_scales), geo.q_shards, plan));
  }
  if (a.k_scales.given()) {
    routes.push_back(
        kv_route(token_grid(travelling.k_scales), token_grid(a.k_scales), geo.kv_shards, plan));
  }
  if (a.v_scales.given()) {
    routes.push_back(geo.v_along_keys() ? kv_route(key_block_grid(travelling.v_scales),
                                                   key_block_grid(a.v_scales), carried_blocks, plan)
                                        : kv_route(token_grid(travelling.v_scales),
                                                   token_grid(a.v_scales), geo.kv_shards, plan));
  }
  Transfer transfer;
  if (Status st = Transfer::plan(comm, routes, &transfer); !st) return st;
  if (Status st = transfer.run(comm, stats); !st) return st;
  GatheredHeads::Impl::install(out, std::move(impl));
  return Status::ok();
}

// The CPU engine on host copies of gathered tensors that live on a GPU, O and LSE copied back.
Status attention_on_host_copies(Communicator& comm, const AttentionArgs& device_args,
                                const RunOptions& options) {
  AttentionArgs host = device_args;
  std::vector<base::HostTensor> staging;
  staging.reserve(9);
  for (TensorView* v :
       {&host.q, &host.k, &host.v, &host.q_scales, &host.k_scales, &host.v_scales, &host.k_mean}) {
    if (!v->given()) continue;
    staging.emplace_back(v->dtype, shape_of(*v));
    if (Status st = comm.copy_to_host(staging.back().view().data, v->data, v->bytes); !st) {
      return st;
    }
    *v = staging.back().view();
  }
  for (TensorView* v : {&host.o, &host.lse}) {
    if (!v->given()) continue;
    staging.emplace_back(v->dtype, shape_of(*v));
    *v = staging.back().view();
  }
  if (Status st = attention(host, options); !st) return st;
  if (Status st = comm.copy_from_host(device_args.o.data, host.o.data, host.o.bytes); !st) {
    return st;
  }
  if (host.lse.given())
    return comm.copy_from_host(device_args.lse.data, host.lse.data, host.lse.bytes);
  return Status::ok();
}

}  // namespace

GatheredHeads::GatheredHeads() = default;
GatheredHeads::GatheredHeads(GatheredHeads&&) noexcept = default;
GatheredHeads& GatheredHeads::operator=(GatheredHeads&&) noexcept = default;
GatheredHeads::~GatheredHeads() = default;

const AttentionArgs& GatheredHeads::args() const {
  return impl_->args;
}
int64_t GatheredHeads::first_q_head() const {
  return impl_->heads.q_first;
}
int64_t GatheredHeads::kv_head(int64_t j) const {
  return impl_->heads.kv_of_local(j);
}

Status gather_heads(Communicator& comm, const AttentionArgs& shard, const SendQuantization& sq,
                    GatheredHeads* out, ExchangeStats* stats) {
  ExchangeStats ignored;
  return gather(comm, shard, sq, Status::ok(), out, stats ? stats : &ignored);
}

Status run_local_attention(Communicator& comm, const GatheredHeads& gathered,
                           const RunOptions& options, Engine* used) {
  Engine ignored;
  if (used == nullptr) used = &ignored;
  if (!gathered.ready()) return Status::invalid("gathered heads: gather_heads has not filled them");
  RunOptions engine = options;
  if (comm.memory() == MemorySpace::host) {
    // Automatic on host tensors is the fast CPU engine.
    if (engine.engine == Engine::automatic) engine.engine = Engine::cpu_fast;
    *used = engine.engine;
    return attention(gathered.args(), engine);
  }
  if (options.engine == Engine::cuda || options.engine == Engine::automatic) {
    engine.engine = Engine::cuda;
    engine.stream = comm.stream();
    *used = Engine::cuda;
    const Status st = attention(gathered.args(), engine);
    // Automatic falls back to the CPU engine where the CUDA engine does not take the problem;
    // every rank has the same local problem, so every rank decides alike.
    if (st || options.engine == Engine::cuda || st.code() != ErrorCode::unsupported) return st;
  }
  engine.engine =
      options.engine == Engine::cpu_reference ? Engine::cpu_reference : Engine::cpu_fast;
  *used = engine.engine;
  return attention_on_host_copies(comm, gathered.args(), engine);
}

Status scatter_sequence(Communicator& comm, const GatheredHeads& gathered, ExchangeStats* stats) {
  ExchangeStats ignored;
  if (stats == nullptr) stats = &ignored;
  const GatheredHeads::Impl* g = gathered.impl();
  if (g == nullptr) return Status::invalid("gathered heads: gather_heads has not filled them");
  if (g->comm != &comm) {
    return Status::invalid("gathered heads: scatter with the communicator that gathered them");
  }
  const int64_t n = g->heads.q_count;
  std::vector<Route> routes;
  routes.push_back(
      output_route(token_grid(g->args.o), token_grid(g->shard_o), g->geometry.q_shards, n));
  if (g->args.lse.given()) {
    routes.push_back(
        output_route(lse_grid(g->args.lse), lse_grid(g->shard_lse), g->geometry.q_shards, n));
  }
  Transfer transfer;
  if (Status st = Transfer::plan(comm, routes, &transfer); !st) return st;
  return transfer.run(comm, stats);
}

Status sharded_attention(Communicator& comm, const AttentionArgs& shard, const RunOptions& options,
                         const SendQuantization& sq, ShardedStats* stats) {
  ShardedStats ignored;
  if (stats == nullptr) stats = &ignored;
  const auto start = Clock::now();
  const Status engine =
      options.engine == Engine::cuda && comm.memory() != MemorySpace::cuda
          ? Status::unsupported(
                "engine: the CUDA engine needs the shards in GPU memory (the NCCL backend)")
          : Status::ok();
  GatheredHeads gathered;
  if (Status st = gather(comm, shard, sq, engine, &gathered, &stats->forward); !st) return st;
  const auto attention_start = Clock::now();
  if (Status st = run_local_attention(comm, gathered, options, &stats->attention_engine); !st) {
    return st;
  }
  stats->attention_seconds += seconds_since(attention_start);
  if (Status st = scatter_sequence(comm, gathered, &stats->reverse); !st) return st;
  stats->total_seconds += seconds_since(start);
  return Status::ok();
}

}  // namespace mxattn::dist
