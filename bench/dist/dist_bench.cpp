// The all-to-alls of sequence-parallel attention (spec §8), measured: per payload (bf16, MX stored,
// bf16 quantized before sending) and sequence length, the bytes each all-to-all moved, its time on
// the wire, its bus bandwidth (nccl-tests' definition) and its share of the total time beside the
// local attention. Run as `mpirun -np P mxattn_bench_dist` (MPI), or with --backend nccl (one GPU
// per rank; under mpirun, or one rank alone). Rank 0 prints a table and, with --json, writes it.
// Everything goes through the public API (include/mxattn/dist.h): the three steps of
// sharded_attention, timed one by one.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_util.h"
#include "cli.h"
#include "dist/agreement.h"
#include "dist/report.h"
#include "dist/slice.h"
#include "mxattn/dist.h"
#include "workload/problem.h"

namespace {

using namespace mxattn;
using bench::Json;

struct Payload {
  const char* name;
  DType q, kv;                // as stored
  std::optional<DType> send;  // Q, K and V quantized by the sender to this type
};

constexpr Payload kPayloads[] = {
    {"bf16", DType::bf16, DType::bf16, std::nullopt},
    {"mxfp8 K,V", DType::bf16, DType::e4m3, std::nullopt},
    {"mxfp8 Q,K,V", DType::e4m3, DType::e4m3, std::nullopt},
    {"mxfp4 Q,K,V", DType::e2m1, DType::e2m1, std::nullopt},
    {"bf16 sent as mxfp8", DType::bf16, DType::bf16, DType::e4m3},
};

struct Row {
  std::string payload;
  int64_t seq = 0;
  dist::AllToAllSummary forward, reverse;
  double attention_seconds = 0;
  double total_seconds = 0;
  Engine engine = Engine::automatic;  // the engine that ran the attention
};

struct Options {
  dist::Backend backend = dist::Backend::mpi;
  std::vector<int64_t> seq_per_rank = {256, 512};
  int64_t heads_q = 16, heads_kv = 4, dim = 128, repeat = 3, threads = 0;
  Engine engine = Engine::automatic;
  std::string json;
};

Status make_communicator(dist::Backend backend, std::unique_ptr<dist::Communicator>* out) {
  if (backend == dist::Backend::mpi) return dist::make_mpi_communicator({}, out);
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE")) {
    return dist::make_nccl_communicator_over_mpi(-1, out);
  }
  dist::NcclRanks one;
  if (Status st = dist::make_nccl_unique_id(&one.id); !st) return st;
  return dist::make_nccl_communicator(one, out);
}

// Each rank builds only its own shard (random data; the timing does not depend on it), so the
// sequence can outgrow one rank's memory; median run of `repeat` after a warm-up.
Status measure(dist::Communicator& comm, const Options& o, const Payload& payload, int64_t seq,
               Row* row) {
  workload::Spec c = workload::decode_step();
  c.seq_q = c.seq_k = seq;
  c.heads_q = o.heads_q;
  c.heads_kv = o.heads_kv;
  c.dim_qk = c.dim_v = o.dim;
  c.q_type = payload.q;
  c.k_type = c.v_type = payload.kv;
  c.o_type = DType::bf16;
  c.causal = Causal::top_left;
  c.seed = uint64_t(comm.rank()) + 1;
  workload::Problem w;
  dist::PlacedShard placed;
  Status ready = workload::Problem::build(c, &w);
  if (ready) ready = placed.place(comm, w.args());
  if (Status st = dist::agree_on(comm, ready); !st) return st;
  dist::SendQuantization sq;
  sq.q = sq.k = sq.v = payload.send;
  RunOptions options;
  options.engine = o.engine;
  options.threads = int(o.threads);
  std::vector<dist::ShardedStats> runs;
  for (int64_t r = 0; r <= o.repeat; ++r) {
    dist::ShardedStats stats;
    if (Status st = dist::measure_sharded_attention(comm, placed.args(), options, sq, &stats);
        !st) {
      return st;
    }
    if (r > 0) runs.push_back(stats);
  }
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.total_seconds < b.total_seconds; });
  std::vector<dist::ShardedStats> ranks;
  if (Status st = dist::gather_stats(comm, runs[runs.size() / 2], &ranks); !st) return st;
  row->payload = payload.name;
  row->seq = seq * comm.size();
  row->forward = dist::summarize(ranks, true);
  row->reverse = dist::summarize(ranks, false);
  row->engine = ranks[0].attention_engine;
  for (const dist::ShardedStats& r : ranks) {
    row->attention_seconds = std::max(row->attention_seconds, r.attention_seconds);
    row->total_seconds = std::max(row->total_seconds, r.total_seconds);
  }
  return Status::ok();
}

const char* engine_name(Engine e) {
  switch (e) {
    case Engine::cpu_reference:
      return "cpu-reference";
    case Engine::cuda:
      return "cuda";
    default:
      return "cpu-fast";
  }
}

void print_row(const Row& r) {
  std::printf("%-20s %-13s %7lld %10.3f %9.3f %9.3f %10.3f %9.3f %9.3f %11.3f %10.3f %7.1f%%\n",
              r.payload.c_str(), engine_name(r.engine), static_cast<long long>(r.seq),
              double(r.forward.bytes) * 1e-6, r.forward.wire_seconds * 1e3,
              r.forward.bus_bytes_per_second * 1e-9, double(r.reverse.bytes) * 1e-6,
              r.reverse.wire_seconds * 1e3, r.reverse.bus_bytes_per_second * 1e-9,
              r.attention_seconds * 1e3, r.total_seconds * 1e3,
              (r.forward.share + r.reverse.share) * 100);
}

Json to_json(const dist::Communicator& comm, const Options& o, const std::vector<Row>& rows) {
  Json runs = Json::array();
  for (const Row& r : rows) {
    runs.push_back({{"payload", r.payload},
                    {"engine", engine_name(r.engine)},
                    {"seq", r.seq},
                    {"forward_bytes", r.forward.bytes},
                    {"forward_wire_ms", r.forward.wire_seconds * 1e3},
                    {"forward_bus_gbps", r.forward.bus_bytes_per_second * 1e-9},
                    {"forward_ms", r.forward.seconds * 1e3},
                    {"reverse_bytes", r.reverse.bytes},
                    {"reverse_wire_ms", r.reverse.wire_seconds * 1e3},
                    {"reverse_bus_gbps", r.reverse.bus_bytes_per_second * 1e-9},
                    {"reverse_ms", r.reverse.seconds * 1e3},
                    {"attention_ms", r.attention_seconds * 1e3},
                    {"total_ms", r.total_seconds * 1e3},
                    {"comm_share", r.forward.share + r.reverse.share}});
  }
  return {{"ranks", comm.size()}, {"backend", o.backend == dist::Backend::mpi ? "mpi" : "nccl"},
          {"heads_q", o.heads_q}, {"heads_kv", o.heads_kv},
          {"head_dim", o.dim},    {"runs", runs}};
}

}  // namespace

int main(int argc, char** argv) {
  using mxattn::tools::FlagParser;
  constexpr const char* kProgram = "mxattn_bench_dist";
  Options o;
  FlagParser flags = FlagParser::for_program(
      "mxattn_bench_dist", "[flags]    (under mpirun -np P)",
      "Times the all-to-alls of sequence-parallel attention beside the attention.");
  flags.add_choice("backend", &o.backend,
                   {{"mpi", dist::Backend::mpi}, {"nccl", dist::Backend::nccl}}, "communicator");
  flags.add_int_list("seq-per-rank", &o.seq_per_rank, "sequence rows per rank, one run each");
  flags.add_int("heads-q", &o.heads_q, "query heads (a multiple of the ranks)");
  flags.add_int("heads-kv", &o.heads_kv, "KV heads");
  flags.add_int("head-dim", &o.dim, "head dim of Q, K and V");
  flags.add_int("repeat", &o.repeat, "timed runs after one warm-up (the median is kept)");
  flags.add_int("threads", &o.threads, "CPU threads per rank (0: all)");
  flags.add_choice("engine", &o.engine,
                   {{"auto", Engine::automatic},
                    {"cpu", Engine::cpu_fast},
                    {"reference", Engine::cpu_reference},
                    {"cuda", Engine::cuda}},
                   "engine of the local attention (auto: the CUDA engine on GPU ranks where it "
                   "takes the problem, else the fast CPU engine)");
  flags.add_string("json", &o.json, "FILE", "also write the table as JSON (rank 0)");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (o.repeat < 1) return flags.usage_error("--repeat must be >= 1");

  std::unique_ptr<dist::Communicator> comm;
  if (Status st = make_communicator(o.backend, &comm); !st) {
    std::fprintf(stderr, "%s: %s\n", kProgram, st.message().c_str());
    return 1;
  }
  const bool lead = comm->rank() == 0;
  // A --json path that cannot be written ends every rank before the run (rank 0 says why).
  const bool writable = !lead || o.json.empty() || bench::json_writable(kProgram, o.json);
  if (!dist::agree_on(*comm, writable ? Status::ok() : Status::invalid("--json"))) return 1;
  if (lead) {
    std::printf("%d ranks over %s (%s memory), Hq=%lld Hkv=%lld D=%lld, causal, O bf16 with LSE\n",
                comm->size(), o.backend == dist::Backend::mpi ? "MPI" : "NCCL",
                comm->memory() == dist::MemorySpace::host ? "host" : "GPU",
                static_cast<long long>(o.heads_q), static_cast<long long>(o.heads_kv),
                static_cast<long long>(o.dim));
    std::printf("%-20s %-13s %7s %10s %9s %9s %10s %9s %9s %11s %10s %8s\n", "payload", "engine",
                "seq", "fwd MB", "wire ms", "bus GB/s", "rev MB", "wire ms", "bus GB/s",
                "attention ms", "total ms", "comm");
  }
  std::vector<Row> rows;
  for (const int64_t seq : o.seq_per_rank) {
    for (const Payload& payload : kPayloads) {
      Row row;
      if (Status st = measure(*comm, o, payload, seq, &row); !st) {
        if (lead) std::fprintf(stderr, "%s: %s\n", kProgram, st.message().c_str());
        return 1;
      }
      if (lead) print_row(row);
      rows.push_back(row);
    }
  }
  if (lead && !o.json.empty() && !bench::write_json(kProgram, o.json, to_json(*comm, o, rows))) {
    return 1;
  }
  return 0;
}
