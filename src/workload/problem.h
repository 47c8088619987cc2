// A seeded random attention problem owning its buffers: what `mxattn run`, the benchmarks and the
// tests run. It stores its spec's data (workload/data.h) as the producer would (rotated, smoothed,
// rounded to f16/bf16 or quantized to MX) in the spec's layouts (dense or paged KV, strided or
// head-major views, poisoned padding), with the outputs poisoned, and hands out the AttentionArgs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/host_tensor.h"
#include "mxattn/attention.h"
#include "workload/data.h"
#include "workload/spec.h"

namespace mxattn::workload {

class GuardedBuffer;

class Problem {
 public:
  Problem();
  Problem(Problem&&) noexcept;
  Problem& operator=(Problem&&) noexcept;
  ~Problem();

  // Draws the data of `spec` (or takes the given `inputs`), builds every buffer and validates the
  // arguments as the library does: what the command line and the benchmarks run.
  static Status build(const Spec& spec, Problem* out, const Inputs& inputs = {});
  // Builds the buffers of `spec` holding `data` (generate(spec), or a changed copy of it), without
  // the library's validation, so that tests can also build problems an engine must refuse.
  static Status build(const Spec& spec, Data data, Problem* out);

  const Spec& spec() const { return spec_; }
  const Data& data() const { return data_; }
  // The arguments of the stored problem, writing to this problem's outputs.
  const AttentionArgs& args() const { return args_; }

  // Adds the partial outputs O_s [slots, B, Sq, Hq, Dv] and L_s [slots, B, Hq, Sq] (f32,
  // contiguous), poisoned; how many slots a run needs is the split plan's business.
  void add_partials(int64_t slots);
  int64_t slots() const { return slots_; }

  // Fills O, LSE and the partials with NaN and the counts with -1, so that an element an engine
  // fails to write shows.
  void poison_outputs();

  // Moves every view into a buffer of exactly its logical size that ends against an unmapped page,
  // so that a read or write past any view's end faults.
  void place_in_guarded_memory();

  // The same problem on the unquantized f32 inputs (dense KV, before any transform), writing to
  // `o` and `lse`: the reference on these against the reference on args() is the quantization error
  // of spec §9.
  AttentionArgs unquantized_args(const TensorView& o, const TensorView& lse) const;

  // FLOPs of the problem: 2 * (Dqk + Dv) per visible (query row, key) pair, per query head.
  double flops() const;
  // Bytes an engine must move at least: Q, the valid keys' K and V (scales included), O and LSE.
  double min_bytes() const;
  // One line: the sizes, types, masks and options of the problem.
  std::string describe() const;

 private:
  Status lay_out();

  Spec spec_;
  Data data_;
  AttentionArgs args_;
  int64_t slots_ = 0;
  bool given_layout_ = false;  // the sparse layout came as an input
  std::vector<base::HostTensor> storage_;
  std::vector<std::unique_ptr<GuardedBuffer>> guarded_;
};

// Every view of `args` that is given, with its argument name, for code that visits them all.
struct NamedView {
  const char* name;
  TensorView* view;
};
std::vector<NamedView> given_views(AttentionArgs& args);

// The default problem of `mxattn run`: a decode step, B=1 Hq=32 Hkv=8 D=128, 8192 cached keys,
// bf16 Q and O, MXFP8 (E4M3) K and V, split-KV auto; paged caches with two spare pages, sparse
// layouts of a fixed share of key blocks per query block, broadcast over the batch.
Spec decode_step();

}  // namespace mxattn::workload
