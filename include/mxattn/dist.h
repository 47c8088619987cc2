// Sequence-parallel attention (spec §8): Ulysses all-to-all over MPI (CPU ranks) or NCCL (one GPU
// per rank), with any storage type on the wire, MX data and its logical-size scales included.
//
// Each of P ranks holds a contiguous shard of the sequence for all heads. The forward all-to-all
// leaves each rank with the whole sequence for Hq/P query heads and the KV heads they read; the
// rank runs attention on that locally; the reverse all-to-all returns O (and LSE) to the sequence
// layout. The result on every rank equals, bit for bit, the single-process result of the same
// engine on the gathered tensors.
//
// Every call here is collective: all ranks of the communicator make the same calls in the same
// order. Arguments are checked on every rank and the verdict is shared before any data moves, so an
// invalid argument on one rank makes every rank return an error (naming that rank) instead of
// leaving the others waiting in an all-to-all.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "mxattn/attention.h"
#include "mxattn/mx.h"
#include "mxattn/status.h"

namespace mxattn::dist {

enum class Backend : uint8_t { mpi, nccl };

// Where the tensors handed to a communicator live: host memory (MPI) or the rank's GPU (NCCL).
enum class MemorySpace : uint8_t { host, cuda };

// `height` rows of `width` bytes, rows `src_pitch` and `dst_pitch` bytes apart (cudaMemcpy2D's
// shape).
struct Copy2D {
  const void* src = nullptr;
  int64_t src_pitch = 0;
  void* dst = nullptr;
  int64_t dst_pitch = 0;
  int64_t width = 0;
  int64_t height = 0;
};

// A group of ranks, the collectives the exchanges need, and the memory its tensors live in. The MPI
// and NCCL backends implement it; another transport can too.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual Backend backend() const = 0;
  virtual MemorySpace memory() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Collectives. Byte all-to-all over buffers in memory(): segment p of `send` (send_counts[p]
  // bytes at send_displs[p]) lands in rank p's `recv` at its recv_displs[this rank]. 64-bit
  // throughout.
  virtual Status all_to_all(const void* send, const int64_t* send_counts,
                            const int64_t* send_displs, void* recv, const int64_t* recv_counts,
                            const int64_t* recv_displs) = 0;
  // Host buffers: every rank's `bytes` bytes, in rank order, into `all` (size() * bytes).
  virtual Status all_gather(const void* mine, int64_t bytes, void* all) = 0;
  // Host f32 values, in place: the element-wise maximum over the ranks.
  virtual Status all_reduce_max(float* values, int64_t count) = 0;

  // Memory of memory(). Copies and collectives may run asynchronously until synchronize().
  virtual Status allocate(int64_t bytes, void** data) = 0;
  virtual void deallocate(void* data) = 0;
  virtual Status copy_2d(const Copy2D* copies, int64_t count) = 0;
  virtual Status copy_to_host(void* host, const void* data, int64_t bytes) = 0;
  virtual Status copy_from_host(void* data, const void* host, int64_t bytes) = 0;
  virtual Status synchronize() = 0;
  // The cudaStream_t its copies and collectives run on (GPU memory); nullptr for host memory.
  virtual void* stream() const { return nullptr; }
};

// Whether this build of mxattn has each backend (the other factories return
// ErrorCode::unsupported).
bool built_with_mpi();
bool built_with_nccl();

struct MpiOptions {
  // Address of the caller's MPI_Comm to duplicate; nullptr: MPI_COMM_WORLD.
  const void* mpi_comm = nullptr;
  // MPI-3 counts are int: an all-to-all with a segment or offset above this many bytes moves in
  // rounds of MPI_Alltoallw over 64-bit addressed types instead of one MPI_Alltoallv.
  int64_t max_bytes_per_call = INT32_MAX;
};

// CPU ranks, one process each, started by `mpirun -np P`. If MPI is not initialized yet this
// initializes it, and MPI_Finalize runs when the last communicator that needed it is destroyed.
Status make_mpi_communicator(const MpiOptions& options, std::unique_ptr<Communicator>* out);

inline constexpr int kNcclUniqueIdBytes = 128;
using NcclUniqueId = std::array<uint8_t, kNcclUniqueIdBytes>;

// The id that names a new NCCL group: made on rank 0 and handed to every rank by the launcher.
Status make_nccl_unique_id(NcclUniqueId* id);

struct NcclRanks {
  int rank = 0;
  int size = 1;
  int device = -1;  // CUDA device of this rank; -1: rank % (devices visible)
  NcclUniqueId id{};
};

// One GPU per rank, from a launcher that passed the unique id to every rank.
Status make_nccl_communicator(const NcclRanks& ranks, std::unique_ptr<Communicator>* out);

// One GPU per rank under `mpirun`: rank 0 makes the id and broadcasts it over MPI; each rank takes
// the GPU of its node-local rank (modulo the devices visible) unless `device` >= 0.
Status make_nccl_communicator_over_mpi(int device, std::unique_ptr<Communicator>* out);

// Quantize-before-send: a plain-float (f32, f16, bf16) shard of Q, K or V is quantized by its
// sender to this MX element type, so fewer bytes travel. Q and K are blocked along the head dim, V
// along AttentionArgs::v_scale_axis; where blocks of 32 keys straddle shards, the ranks that share
// a block agree on its scale first (an all-reduce of the block maxima), so the gathered tensors are
// exactly what quantizing the whole tensor in one process gives.
struct SendQuantization {
  std::optional<DType> q;
  std::optional<DType> k;
  std::optional<DType> v;
  ScaleMode mode = ScaleMode::floor;
};

// What one all-to-all cost this rank.
struct ExchangeStats {
  int64_t bytes_to_peers = 0;    // sent to other ranks (on the wire)
  int64_t bytes_from_peers = 0;  // received from other ranks
  int64_t bytes_local = 0;       // this rank's own part, copied in place, never on the wire
  double quantize_seconds = 0;   // quantize-before-send (forward only)
  double pack_seconds = 0;       // copies into the send buffer, and the local part's copies
  double wire_seconds = 0;       // the collective itself
  double unpack_seconds = 0;     // copies out of the receive buffer
  double seconds() const { return quantize_seconds + pack_seconds + wire_seconds + unpack_seconds; }
};

struct ShardedStats {
  ExchangeStats forward;  // Q, K, V (and scales) to the head layout
  ExchangeStats reverse;  // O (and LSE) back to the sequence layout
  double attention_seconds = 0;
  double total_seconds = 0;
  Engine attention_engine = Engine::automatic;  // the engine that ran the local attention
};

// The rank's inputs after the forward all-to-all: the whole sequence for its heads, in the
// communicator's memory, and the outputs its local attention writes. The communicator must outlive
// it.
class GatheredHeads {
 public:
  GatheredHeads();
  GatheredHeads(GatheredHeads&&) noexcept;
  GatheredHeads& operator=(GatheredHeads&&) noexcept;
  ~GatheredHeads();

  bool ready() const { return impl_ != nullptr; }

  // The local problem: Q [B, Sq, Hq/P, Dqk]; K, V [B, Sk, kv_heads, D]; scales at logical size;
  // O [B, Sq, Hq/P, Dv] and LSE [B, Hq/P, Sq] (when the shard asked for LSE); the shard's options
  // and metadata, with a per-head sparse layout narrowed to this rank's heads. Sq and Sk are the
  // whole sequence. Local query head i is global head first_q_head() + i.
  const AttentionArgs& args() const;
  int64_t first_q_head() const;
  // Local KV head j is global KV head kv_head(j). Heads split when Hkv % P == 0; otherwise each
  // rank gets the KV heads its query heads read, as often as the local GQA grouping needs them.
  int64_t kv_head(int64_t j) const;

  struct Impl;  // defined in src/dist; being a member, it fills impl_
  const Impl* impl() const { return impl_.get(); }

 private:
  std::unique_ptr<Impl> impl_;
};

// The shard a rank passes: Q [B, Sq_r, Hq, Dqk], K [B, Sk_r, Hkv, Dqk], V [B, Sk_r, Hkv, Dv] and
// their scales (MX: [B, S_r, H, D/32], or V along the keys [B, Hkv, ceil(Sk_r/32), Dv]), O
// [B, Sq_r, Hq, Dv] and LSE [B, Hq, Sq_r]; all contiguous, in the communicator's memory, with
// k_mean (the whole sequence's [B, Hkv, Dqk]). Shard lengths may differ (zero included); rank r's
// shard follows rank r-1's. Metadata (kv_len, prefix_offset, sparse layout) describes the whole
// sequence, lives on the host and is the same on every rank. Hq must be a multiple of P. Not
// supported: paged KV, split partial outputs. MX V with scales along the keys travels as given only
// when every non-empty key shard starts at a multiple of 32 keys (blocks may not straddle ranks);
// otherwise quantize V on send, or use scales along the head dim.

// Forward all-to-all: fills `out` (replacing what it held).
Status gather_heads(Communicator& comm, const AttentionArgs& shard,
                    const SendQuantization& quantization, GatheredHeads* out,
                    ExchangeStats* stats = nullptr);

// Attention on the gathered inputs. Host memory: attention(gathered.args(), options). GPU memory:
// Engine::cuda runs the CUDA engine on the gathered tensors, on the communicator's stream;
// Engine::automatic does too where the CUDA engine supports the problem; otherwise (and for the CPU
// engines) the CPU engine runs on host copies of the gathered tensors and O/LSE are copied back.
// `used`, when given, receives the engine that ran.
Status run_local_attention(Communicator& comm, const GatheredHeads& gathered,
                           const RunOptions& options, Engine* used = nullptr);

// Reverse all-to-all: the gathered O (and LSE) into the shard's O (and LSE) given to gather_heads.
Status scatter_sequence(Communicator& comm, const GatheredHeads& gathered,
                        ExchangeStats* stats = nullptr);

// The three steps above.
Status sharded_attention(Communicator& comm, const AttentionArgs& shard,
                         const RunOptions& options = {}, const SendQuantization& quantization = {},
                         ShardedStats* stats = nullptr);

}  // namespace mxattn::dist
