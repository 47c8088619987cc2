// `mxattn dist`: sequence-parallel attention (spec §8), started by `mpirun -np P mxattn dist ...`.
// Every rank builds the same problem from the seed and keeps its shard of the sequence; the ranks
// run the forward all-to-all, attention on their heads and the reverse all-to-all, timed; rank 0
// prints per-rank and total times and the bytes each all-to-all moved, and with --verify whether
// every rank's rows equal the single-process run on the gathered tensors, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "cli.h"
#include "dist/agreement.h"
#include "dist/layout.h"
#include "dist/report.h"
#include "dist/slice.h"
#include "mxattn/dist.h"
#include "problem_flags.h"
#include "verbs.h"
#include "workload/problem.h"

namespace mxattn::tools {
namespace {

using dist::Communicator;
using dist::Shard;

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::string hex_of(const dist::NcclUniqueId& id) {
  std::string s;
  char byte[3];
  for (const uint8_t b : id) {
    std::snprintf(byte, sizeof(byte), "%02x", b);
    s += byte;
  }
  return s;
}

std::optional<dist::NcclUniqueId> id_from_hex(const char* text) {
  dist::NcclUniqueId id{};
  if (std::strlen(text) != 2 * id.size()) return std::nullopt;
  for (size_t i = 0; i < id.size(); ++i) {
    unsigned value = 0;
    if (std::sscanf(text + 2 * i, "%2x", &value) != 1) return std::nullopt;
    id[i] = uint8_t(value);
  }
  return id;
}

// MPI ranks from mpirun. NCCL ranks from mpirun (id over MPI), from a launcher that exported
// MXATTN_NCCL_ID, MXATTN_RANK and MXATTN_WORLD_SIZE, or else one rank on its own.
Status make_communicator(dist::Backend backend, std::unique_ptr<Communicator>* out) {
  if (backend == dist::Backend::mpi) return dist::make_mpi_communicator({}, out);
  if (under_mpirun()) return dist::make_nccl_communicator_over_mpi(-1, out);
  dist::NcclRanks ranks;
  if (const char* hex = std::getenv("MXATTN_NCCL_ID")) {
    const std::optional<dist::NcclUniqueId> id = id_from_hex(hex);
    const char* rank = std::getenv("MXATTN_RANK");
    const char* size = std::getenv("MXATTN_WORLD_SIZE");
    if (!id || rank == nullptr || size == nullptr) {
      return Status::invalid(
          "MXATTN_NCCL_ID needs 256 hex digits (from `mxattn dist --print-nccl-id`), with "
          "MXATTN_RANK and MXATTN_WORLD_SIZE");
    }
    ranks.id = *id;
    ranks.rank = std::atoi(rank);
    ranks.size = std::atoi(size);
  } else if (Status st = dist::make_nccl_unique_id(&ranks.id); !st) {
    return st;
  }
  return dist::make_nccl_communicator(ranks, out);
}

// `total` rows over `ranks` as evenly as whole blocks of 32 allow: every shard but the last a
// multiple of 32, so that any V scale layout travels as stored.
std::vector<int64_t> balanced_lengths(int64_t total, int ranks) {
  const int64_t blocks = (total + 31) / 32;
  std::vector<int64_t> lengths;
  int64_t given = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t end = r + 1 == ranks ? total : std::min(total, blocks * (r + 1) / ranks * 32);
    lengths.push_back(end - given);
    given = end;
  }
  return lengths;
}

std::optional<DType> parse_send_format(const std::string& text) {
  if (text == "none") return std::nullopt;
  return parse_dtype(text);
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

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.bytes == b.bytes && std::memcmp(a.data, b.data, size_t(a.bytes)) == 0;
}

double max_abs_difference(const TensorView& a, const TensorView& b) {
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    worst = std::max(worst, double(std::fabs(base::load_float(a, i) - base::load_float(b, i))));
  }
  return worst;
}

// "[0, 1024)"
std::string rows_text(const Shard& s) {
  char text[64];
  std::snprintf(text, sizeof(text), "[%lld, %lld)", static_cast<long long>(s.offset),
                static_cast<long long>(s.end()));
  return text;
}

// The whole problem in one process, by the engine the sharded run used: on the GPU for the CUDA
// engine, else on the host.
Status run_whole(Communicator& comm, const AttentionArgs& whole, const RunOptions& options) {
  if (comm.memory() == dist::MemorySpace::host || options.engine != Engine::cuda) {
    RunOptions host = options;
    if (host.engine == Engine::automatic || host.engine == Engine::cuda)
      host.engine = Engine::cpu_fast;
    return attention(whole, host);
  }
  dist::PlacedShard placed;
  if (Status st = placed.place(comm, whole); !st) return st;
  RunOptions device = options;
  device.stream = comm.stream();
  if (Status st = attention(placed.args(), device); !st) return st;
  return placed.fetch_outputs(comm, whole);
}

struct Settings {
  dist::Backend backend = dist::Backend::mpi;
  RunOptions options;
  int repeat = 5;
  bool verify = true;
  dist::SendQuantization quantization;
  std::vector<int64_t> q_lengths, kv_lengths;
};

void print_report(const Communicator& comm, const workload::Problem& w, const Settings& s,
                  const std::vector<dist::ShardedStats>& ranks) {
  const int P = comm.size();
  const workload::Spec& c = w.spec();
  const dist::HeadSlice heads = dist::head_slice(c.heads_q, c.heads_kv, P, 0);
  std::printf("problem: %s\n", w.describe().c_str());
  const Engine used = ranks[0].attention_engine;
  std::printf("ranks:   %d over %s (%s memory), engine %s%s\n", P,
              s.backend == dist::Backend::mpi ? "MPI" : "NCCL",
              comm.memory() == dist::MemorySpace::host ? "host" : "GPU", engine_name(used),
              comm.memory() == dist::MemorySpace::cuda && used != Engine::cuda
                  ? " on host copies of the gathered tensors"
                  : "");
  std::printf("heads:   %lld query heads per rank, KV heads %s\n",
              static_cast<long long>(heads.q_count),
              c.heads_kv % P == 0 ? "split" : "replicated (each rank gets those it reads)");
  const auto sent = [](const std::optional<DType>& t) {
    return t ? std::string(name_of(*t)) : std::string("as stored");
  };
  std::printf("wire:    Q %s, K %s, V %s\n", sent(s.quantization.q).c_str(),
              sent(s.quantization.k).c_str(), sent(s.quantization.v).c_str());
  std::printf(
      "\nper rank (median of %d runs; ms; MB sent to the other ranks; the ranks meet before each "
      "all-to-all):\n",
      s.repeat);
  std::printf("%4s  %-15s %-15s %10s %8s %8s %10s %10s %8s %8s %10s\n", "rank", "q rows", "kv rows",
              "forward", "(wire)", "MB", "attention", "reverse", "(wire)", "MB", "total");
  const std::vector<Shard> q = dist::contiguous_shards(s.q_lengths);
  const std::vector<Shard> kv = dist::contiguous_shards(s.kv_lengths);
  for (int r = 0; r < P; ++r) {
    const dist::ShardedStats& t = ranks[size_t(r)];
    const std::string q_rows = rows_text(q[size_t(r)]), kv_rows = rows_text(kv[size_t(r)]);
    std::printf("%4d  %-15s %-15s %10.3f %8.3f %8.3f %10.3f %10.3f %8.3f %8.3f %10.3f\n", r,
                q_rows.c_str(), kv_rows.c_str(), t.forward.seconds() * 1e3,
                t.forward.wire_seconds * 1e3, double(t.forward.bytes_to_peers) * 1e-6,
                t.attention_seconds * 1e3, t.reverse.seconds() * 1e3, t.reverse.wire_seconds * 1e3,
                double(t.reverse.bytes_to_peers) * 1e-6, t.total_seconds * 1e3);
  }
  std::printf("\n%-8s %14s %14s %14s %16s %8s\n", "all-to-all", "MB moved", "slowest ms", "wire ms",
              "bus GB/s", "share");
  for (const bool forward : {true, false}) {
    const dist::AllToAllSummary a = dist::summarize(ranks, forward);
    std::printf("%-10s %14.3f %14.3f %14.3f %16.3f %7.1f%%\n", forward ? "forward" : "reverse",
                double(a.bytes) * 1e-6, a.seconds * 1e3, a.wire_seconds * 1e3,
                a.bus_bytes_per_second * 1e-9, a.share * 100);
  }
  double slowest = 0, attention = 0;
  for (const dist::ShardedStats& t : ranks) {
    slowest = std::max(slowest, t.total_seconds);
    attention = std::max(attention, t.attention_seconds);
  }
  std::printf("total:   %.3f ms (slowest rank), attention %.3f ms (slowest rank)\n", slowest * 1e3,
              attention * 1e3);
}

int run(const workload::Spec& spec, const workload::Inputs& inputs, Settings& s) {
  std::unique_ptr<Communicator> comm;
  if (Status st = make_communicator(s.backend, &comm); !st) {
    std::fprintf(stderr, "mxattn dist: %s\n", st.message().c_str());
    return kExitFailure;
  }
  const int P = comm->size(), me = comm->rank();
  if (s.q_lengths.empty()) s.q_lengths = balanced_lengths(spec.seq_q, P);
  if (s.kv_lengths.empty()) s.kv_lengths = balanced_lengths(spec.seq_k, P);
  for (const auto* lengths : {&s.q_lengths, &s.kv_lengths}) {
    if (int64_t(lengths->size()) != P) {
      if (me == 0) {
        std::fprintf(stderr,
                     "mxattn dist: --q-shards and --kv-shards need one length per rank (%d)\n", P);
      }
      return kExitUsage;
    }
  }
  workload::Problem w;
  if (Status st = workload::Problem::build(spec, &w, inputs); !st) {
    if (me == 0) std::fprintf(stderr, "mxattn dist: %s\n", st.message().c_str());
    return kExitUsage;
  }
  const Shard q_rows = dist::contiguous_shards(s.q_lengths)[size_t(me)];
  const Shard kv_rows = dist::contiguous_shards(s.kv_lengths)[size_t(me)];
  if (q_rows.end() > spec.seq_q || kv_rows.end() > spec.seq_k ||
      dist::contiguous_shards(s.q_lengths).back().end() != spec.seq_q ||
      dist::contiguous_shards(s.kv_lengths).back().end() != spec.seq_k) {
    if (me == 0) std::fprintf(stderr, "mxattn dist: the shards must add up to Sq and Sk\n");
    return kExitUsage;
  }
  // Each rank cuts and places its own shard; they agree on the outcome before any collective, so
  // that one rank's refusal does not leave the others waiting.
  dist::ShardStorage storage;
  AttentionArgs shard;
  dist::PlacedShard placed;
  Status prepared = dist::slice_shard(w.args(), q_rows, kv_rows, &storage, &shard);
  if (prepared) prepared = placed.place(*comm, shard);
  if (Status st = dist::agree_on(*comm, prepared); !st) {
    if (me == 0) std::fprintf(stderr, "mxattn dist: %s\n", st.message().c_str());
    return st.code() == ErrorCode::runtime ? kExitFailure : kExitUsage;
  }

  // One untimed run (warm-up), then the timed ones; each rank keeps its median run.
  std::vector<dist::ShardedStats> runs;
  for (int r = 0; r <= s.repeat; ++r) {
    dist::ShardedStats stats;
    if (Status st = dist::measure_sharded_attention(*comm, placed.args(), s.options, s.quantization,
                                                    &stats);
        !st) {
      if (me == 0) std::fprintf(stderr, "mxattn dist: %s\n", st.message().c_str());
      return st.code() == ErrorCode::runtime ? kExitFailure : kExitUsage;
    }
    if (r > 0) runs.push_back(stats);
  }
  std::sort(runs.begin(), runs.end(),
            [](const auto& a, const auto& b) { return a.total_seconds < b.total_seconds; });
  std::vector<dist::ShardedStats> ranks;
  if (Status st = dist::gather_stats(*comm, runs[runs.size() / 2], &ranks); !st) {
    std::fprintf(stderr, "mxattn dist: %s\n", st.message().c_str());
    return kExitFailure;
  }
  if (me == 0) print_report(*comm, w, s, ranks);
  if (!s.verify) return kExitOk;

  // The verified output is a fresh run's, after poisoning.
  for (int64_t i = 0; i < storage.o.numel(); ++i) base::store_float(storage.o.view(), i, NAN);
  dist::PlacedShard fresh;
  base::HostTensor want_o, want_lse;
  Status st = fresh.place(*comm, shard);
  if (st) st = dist::sharded_attention(*comm, fresh.args(), s.options, s.quantization);
  if (st) st = fresh.fetch_outputs(*comm, shard);
  if (st) {
    st = dist::single_process_on_gathered(*comm, placed.args(), s.quantization, s.options, &want_o,
                                          &want_lse);
  }
  if (!st) {
    std::fprintf(stderr, "mxattn dist: verify: %s\n", st.message().c_str());
    return kExitFailure;
  }
  bool mine_ok = same_bytes(want_o.view(), shard.o);
  if (shard.lse.given()) mine_ok = mine_ok && same_bytes(want_lse.view(), shard.lse);
  // The whole problem in one process: equal bit for bit where the engine's result per head does
  // not depend on the heads around it, which the fast engine's GQA packing does not promise.
  float whole_difference = 0;
  if (!s.quantization.q && !s.quantization.k && !s.quantization.v) {
    RunOptions same_engine = s.options;
    same_engine.engine = ranks[0].attention_engine;
    if (Status single = run_whole(*comm, w.args(), same_engine); single) {
      whole_difference =
          float(max_abs_difference(dist::token_rows(w.args().o, q_rows).view(), shard.o));
    }
  }
  float verdict[2] = {mine_ok ? 0.0f : 1.0f, whole_difference};
  if (Status reduced = comm->all_reduce_max(verdict, 2); !reduced) {
    std::fprintf(stderr, "mxattn dist: %s\n", reduced.message().c_str());
    return kExitFailure;
  }
  const bool pass = verdict[0] == 0.0f;
  if (me == 0) {
    std::printf(
        "verify:  O%s of every rank bitwise equal to the single-process run on the "
        "gathered tensors: %s\n",
        shard.lse.given() ? " and LSE" : "", pass ? "PASS" : "FAIL");
    if (!s.quantization.q && !s.quantization.k && !s.quantization.v) {
      if (verdict[1] == 0.0f) {
        std::printf("         the whole problem in one process: O bitwise equal\n");
      } else {
        std::printf(
            "         the whole problem in one process: O differs by at most %.3g (the "
            "engine packs GQA groups; replicated KV heads make smaller groups)\n",
            double(verdict[1]));
      }
    }
  }
  return pass ? kExitOk : kExitFailure;
}

}  // namespace

int verb_dist(int argc, char** argv) {
  FlagParser flags(
      "dist", "[flags]    (as: mpirun -np P mxattn dist [flags])",
      "Sequence-parallel attention (Ulysses): each rank keeps a contiguous shard of the\n"
      "sequence; an all-to-all gives each rank the whole sequence for Hq/P heads, it runs\n"
      "attention on those, and a second all-to-all returns O and LSE to the sequence layout.\n"
      "Rank 0 prints per-rank and total times and the bytes each all-to-all moved; --verify\n"
      "checks every rank's rows bit for bit. With --backend nccl (one GPU per rank) the ranks\n"
      "come from mpirun, or from MXATTN_NCCL_ID (see --print-nccl-id), MXATTN_RANK and\n"
      "MXATTN_WORLD_SIZE, or else it is one rank.");
  workload::Spec spec = workload::decode_step();
  spec.seq_q = spec.seq_k = 2048;
  ProblemFlags problem(flags, &spec);
  Settings s;
  int64_t threads = 0, repeat = s.repeat;
  std::string send_q = "none", send_k = "none", send_v = "none";
  bool print_id = false;
  flags.add_choice("backend", &s.backend,
                   {{"mpi", dist::Backend::mpi}, {"nccl", dist::Backend::nccl}},
                   "communicator: MPI (CPU ranks) or NCCL (one GPU per rank)");
  flags.add_choice("engine", &s.options.engine,
                   {{"auto", Engine::automatic},
                    {"cpu", Engine::cpu_fast},
                    {"reference", Engine::cpu_reference},
                    {"cuda", Engine::cuda}},
                   "engine of the local attention (auto: the CUDA engine on GPU ranks where it "
                   "takes the problem, else the fast CPU engine)");
  flags.add_int("threads", &threads, "CPU threads per rank (0: all)");
  flags.add_int("repeat", &repeat, "timed runs after one warm-up");
  flags.add_bool("verify", &s.verify, "check every rank's rows bit for bit");
  flags.add_int_list("q-shards", &s.q_lengths,
                     "query rows of each rank (default: even, in whole blocks of 32)");
  flags.add_int_list("kv-shards", &s.kv_lengths,
                     "keys of each rank (default: even, in whole blocks of 32)");
  flags.add_string("send-q", &send_q, "FORMAT|none",
                   "quantize a plain Q shard to this MX type before sending");
  flags.add_string("send-k", &send_k, "FORMAT|none",
                   "quantize a plain K shard to this MX type before sending");
  flags.add_string(
      "send-v", &send_v, "FORMAT|none",
      "quantize a plain V shard to this MX type before sending (along --v-scale-axis)");
  flags.add_bool("print-nccl-id", &print_id,
                 "print a new NCCL unique id (hex) for a launcher to pass as MXATTN_NCCL_ID");
  if (std::optional<int> exit = flags.parse(argc, argv)) return *exit;
  if (print_id) {
    dist::NcclUniqueId id;
    if (Status st = dist::make_nccl_unique_id(&id); !st) {
      std::fprintf(stderr, "mxattn dist: %s\n", st.message().c_str());
      return kExitFailure;
    }
    std::printf("%s\n", hex_of(id).c_str());
    return kExitOk;
  }
  if (std::optional<int> exit = problem.finish(flags)) return *exit;
  if (threads < 0 || repeat < 1) return flags.usage_error("--threads must be >= 0, --repeat >= 1");
  s.options.threads = int(threads);
  s.repeat = int(repeat);
  const struct {
    const char* flag;
    const std::string& text;
    std::optional<DType>* target;
  } sends[] = {{"--send-q", send_q, &s.quantization.q},
               {"--send-k", send_k, &s.quantization.k},
               {"--send-v", send_v, &s.quantization.v}};
  for (const auto& send : sends) {
    *send.target = parse_send_format(send.text);
    if (send.text != "none" && (!*send.target || !is_mx(**send.target))) {
      return flags.usage_error(std::string(send.flag) + " must be an MX type (e4m3, e5m2, e2m3, " +
                               "e3m2, e2m1) or none, not '" + send.text + "'");
    }
  }
  s.quantization.mode = spec.scale_mode;
  return run(spec, problem.inputs(), s);
}

}  // namespace mxattn::tools
