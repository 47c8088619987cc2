// Attention, its split plan and the combine of partials.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>

#include "api/engines.h"
#include "bindings.h"
#include "call_args.h"
#include "core/plan.h"
#include "core/problem.h"
#include "decode_step.h"
#include "mxattn/batch.h"
#include "mxattn/build_info.h"
#include "mxattn/combine.h"

namespace mxattn::python {

namespace {

// The engine `name` asks for, checked against where the tensors are: "auto" follows them (the
// CUDA path on a GPU, the fast CPU engine on the host).
Engine requested_engine(const std::string& name, Placement where) {
  Engine engine;
  if (name == "auto") {
    engine = where.on_gpu ? Engine::cuda : Engine::cpu_fast;
  } else if (name == "cpu") {
    engine = Engine::cpu_fast;
  } else if (name == "reference") {
    engine = Engine::cpu_reference;
  } else if (name == "cuda") {
    engine = Engine::cuda;
  } else {
    throw nb::value_error(
        ("engine must be 'auto', 'cpu', 'reference' or 'cuda', found '" + name + "'").c_str());
  }
  if (engine == Engine::cuda && !where.on_gpu) {
    throw nb::value_error("engine 'cuda' needs the tensors on a GPU; they are on the host");
  }
  if (engine != Engine::cuda && where.on_gpu) {
    throw nb::value_error(
        ("engine '" + name + "' reads host memory but the tensors are on " + where.describe())
            .c_str());
  }
  return engine;
}

// Validates the call as it will run, with stand-in outputs where the caller has not set them yet:
// the errors are the library's own, for the arguments the caller gave.
core::Problem validated(const CallArgs& call) {
  AttentionArgs a = call.args();
  if (!a.o.given()) {
    // Validation reads only the metadata views, never O's memory.
    static uint8_t never_read;
    const bool shaped = a.q.rank == 4 && a.v.rank == 4;
    a.o = shaped ? make_view(&never_read, DType::f32,
                             {a.q.shape[0], a.q.shape[1], a.q.shape[2], a.v.shape[3]})
                 : make_view(&never_read, DType::f32, {1, 1, 1, 1});
  }
  core::Problem p;
  raise_if_failed(core::validate_problem(a, &p));
  return p;
}

nb::tuple shape_tuple(std::initializer_list<int64_t> dims) {
  nb::list l;
  for (int64_t d : dims) l.append(d);
  return nb::tuple(l);
}

// The engine that runs the call (api::choose_engine: the one home of that choice).
api::EngineKind engine_kind(const CallArgs& call, const core::Problem& p, const std::string& name) {
  const Placement where = call.placement();
  api::EngineKind kind;
  raise_if_failed(api::choose_engine(p, requested_engine(name, where), where.on_gpu, &kind));
  return kind;
}

// Shapes of the outputs a call needs, and the split slots S of its partials under `engine`; with
// `partials`, the engine chosen as it will be once the call holds partial outputs.
nb::dict output_shapes(const CallArgs& call, const std::string& engine, bool partials) {
  core::Problem p = validated(call);
  if (partials) p.args.split.partial_o = p.args.o;  // stands for the partials the call will hold
  const core::SplitParams split = api::split_params(p, engine_kind(call, p, engine));
  nb::dict d;
  d["o"] = shape_tuple({p.batch, p.seq_q, p.heads_q, p.dim_v});
  d["lse"] = shape_tuple({p.batch, p.heads_q, p.seq_q});
  d["slots"] = core::partial_slots(p, split);
  return d;
}

// A batch plan (spec §12): planned once for capacities; each run takes a call's tensors and
// metadata (cu_seqlens_q, seq_lens as kv_len, block_table).
class BatchPlanHandle {
 public:
  BatchPlanHandle(int64_t max_sequences, int64_t max_query_rows, int64_t max_kv_len,
                  int64_t page_size, int64_t num_pages, int64_t heads_q, int64_t heads_kv,
                  int64_t dim_qk, int64_t dim_v, const std::string& q_type,
                  const std::string& k_type, const std::string& v_type, const std::string& o_type,
                  const std::string& causal, int64_t window, std::optional<float> scale, bool lse,
                  int32_t split_kv, const std::string& engine) {
    BatchShape s;
    s.max_sequences = max_sequences;
    s.max_query_rows = max_query_rows;
    s.max_kv_len = max_kv_len;
    s.page_size = page_size;
    s.num_pages = num_pages;
    s.heads_q = heads_q;
    s.heads_kv = heads_kv;
    s.dim_qk = dim_qk;
    s.dim_v = dim_v;
    s.q_type = parse_element_type("q", q_type);
    s.k_type = parse_element_type("k", k_type);
    s.v_type = parse_element_type("v", v_type);
    s.o_type = parse_element_type("out_dtype", o_type);
    if (causal == "none") {
      s.causal = Causal::none;
    } else if (causal == "bottom_right") {
      s.causal = Causal::bottom_right;
    } else if (causal == "top_left") {
      s.causal = Causal::top_left;
    } else {
      throw nb::value_error(
          ("causal must be None, 'bottom_right' or 'top_left', found '" + causal + "'").c_str());
    }
    s.window = window;
    s.scale = scale;
    s.lse = lse;
    s.split.split_kv = split_kv;
    raise_if_failed(
        BatchPlan::plan(s, RunOptions{requested_engine(engine, Placement{}), 0, nullptr}, &plan_));
  }

  void run(const CallArgs& call) const {
    const RaggedArgs a = call.ragged_args();
    BatchRun r;
    r.q = a.q;
    r.q_scales = a.q_scales;
    r.k = a.k;
    r.v = a.v;
    r.k_scales = a.k_scales;
    r.v_scales = a.v_scales;
    r.o = a.o;
    r.lse = a.lse;
    r.cu_seqlens_q = a.cu_seqlens_q;
    r.seq_lens = a.seq_lens;
    r.block_table = a.paged.block_table;
    Status status;
    {
      nb::gil_scoped_release released;
      status = plan_.run(r);
    }
    raise_if_failed(status);
  }

 private:
  BatchPlan plan_;
};

// A ragged call (spec §10) on the CPU engines.
void run_ragged(const CallArgs& call, const std::string& engine, int threads) {
  const Engine requested = requested_engine(engine, call.placement());
  Status status;
  {
    nb::gil_scoped_release released;
    status = attention(call.ragged_args(), RunOptions{requested, threads, nullptr});
  }
  raise_if_failed(status);
}

void run(const CallArgs& call, const std::string& engine, int threads, uintptr_t stream) {
  const Engine requested = requested_engine(engine, call.placement());
  if (requested == Engine::cuda) {
    run_cuda(call, stream);
    return;
  }
  Status status;
  {
    nb::gil_scoped_release released;
    status = attention(call.args(), RunOptions{requested, threads, nullptr});
  }
  raise_if_failed(status);
}

nb::dict describe_split(const core::QueryTile& q, int64_t split, int64_t tile_n) {
  const core::TileRun r = core::split_tiles(q.run, q.splits, split);
  nb::dict d;
  d["tiles"] = r.count;
  if (r.count == 0) {
    d["key_tiles"] = nb::none();
    d["keys"] = nb::none();
    return d;
  }
  const int64_t first = q.key_tile(r.begin);
  const int64_t last = q.key_tile(r.begin + r.count - 1);
  d["key_tiles"] = nb::make_tuple(first, last);
  d["keys"] = nb::make_tuple(first * tile_n, (last + 1) * tile_n - 1);
  return d;
}

// The split partition of the call under `engine`, as `mxattn plan` prints it: per query tile its
// key tiles, the key range of each split, the exact count and rocMLIR's conservative row counts.
nb::dict split_plan(const CallArgs& call, const std::string& engine) {
  const core::Problem p = validated(call);
  const api::EngineKind kind = engine_kind(call, p, engine);
  const core::SplitParams s = api::split_params(p, kind);
  nb::list tiles;
  const int64_t per_head = core::query_tiles_per_head(p, s);
  // Heads share one partition unless the sparse layout differs per head.
  const int64_t heads = p.sparse ? p.heads_q : 1;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < per_head; ++t) {
        const core::QueryTile q = core::query_tile(p, s, b, h, t);
        nb::dict tile;
        tile["b"] = b;
        tile["h"] = p.sparse ? nb::object(nb::int_(h)) : nb::none();
        tile["tile"] = t;
        tile["rows"] = nb::make_tuple(q.row_first, q.row_last);
        tile["key_tiles"] = q.run.count;
        tile["split_kv"] = q.splits;
        tile["count"] = q.count;
        nb::list splits, conservative;
        for (int64_t sp = 0; sp < q.splits; ++sp) splits.append(describe_split(q, sp, s.tile_n));
        for (int64_t i = q.row_first; i <= q.row_last; ++i) {
          conservative.append(core::conservative_split_count(q.vis, i, s.tile_n, q.splits));
        }
        tile["splits"] = splits;
        tile["conservative_counts"] = conservative;
        tiles.append(tile);
      }
    }
  }
  nb::dict d;
  d["engine"] = std::string(api::name_of(kind));
  d["tile_m"] = s.tile_m;
  d["tile_n"] = s.tile_n;
  d["split_kv"] = s.split_kv == 0 ? nb::object(nb::str("auto")) : nb::object(nb::int_(s.split_kv));
  d["target_tiles_per_split"] = s.target_tiles_per_split;
  d["max_splits"] = s.max_splits;
  d["partial_slots"] = core::partial_slots(p, s);
  d["tiles"] = tiles;
  return d;
}

void combine_partials(const InputArray& partial_o, const std::string& partial_o_type,
                      const InputArray& partial_lse, const InputArray& counts, const OutputArray& o,
                      const std::string& o_type, const std::optional<OutputArray>& lse, int threads,
                      uintptr_t stream) {
  CombineArgs a;
  a.partial_o = view_of("partial_o", partial_o, parse_element_type("partial_o", partial_o_type));
  a.partial_lse = view_of("partial_lse", partial_lse, DType::f32);
  a.counts = view_of("counts", counts, DType::i32);
  a.o = view_of("o", o, parse_element_type("o", o_type));
  if (lse) a.lse = view_of("lse", *lse, DType::f32);
  const struct {
    const char* name;
    int device_type;
    int device_id;
  } placed[] = {{"partial_o", partial_o.device_type(), partial_o.device_id()},
                {"partial_lse", partial_lse.device_type(), partial_lse.device_id()},
                {"counts", counts.device_type(), counts.device_id()},
                {"o", o.device_type(), o.device_id()},
                {"lse", lse ? lse->device_type() : 1, lse ? lse->device_id() : 0}};
  Placement where = placement_of(placed[0].device_type, placed[0].device_id, placed[0].name);
  for (const auto& p : placed) {
    if (!(placement_of(p.device_type, p.device_id, p.name) == where)) {
      raise_if_failed(Status::invalid(std::string(p.name) + " is not on " + where.describe() +
                                      " with partial_o; pass them all on one device"));
    }
  }
  Status status;
  {
    nb::gil_scoped_release released;
    const auto work = [&] {
      return combine(a, RunOptions{Engine::automatic, threads, reinterpret_cast<void*>(stream)});
    };
    status = where.on_gpu ? on_device(where.device_id, work) : work();
  }
  raise_if_failed(status);
}

void merge_state_arrays(const InputArray& o_a, const std::string& o_a_type, const InputArray& lse_a,
                        const InputArray& o_b, const std::string& o_b_type, const InputArray& lse_b,
                        const OutputArray& o, const std::string& o_type,
                        const std::optional<OutputArray>& lse, uintptr_t stream) {
  MergeArgs a;
  a.o_a = view_of("o_a", o_a, parse_element_type("o_a", o_a_type));
  a.lse_a = view_of("lse_a", lse_a, DType::f32);
  a.o_b = view_of("o_b", o_b, parse_element_type("o_b", o_b_type));
  a.lse_b = view_of("lse_b", lse_b, DType::f32);
  a.o = view_of("out", o, parse_element_type("out", o_type));
  if (lse) a.lse = view_of("out_lse", *lse, DType::f32);
  const Placement where = placement_of(o_a, "o_a");
  Status status;
  {
    nb::gil_scoped_release released;
    const auto work = [&] {
      return merge_states(a, RunOptions{Engine::automatic, 0, reinterpret_cast<void*>(stream)});
    };
    status = where.on_gpu ? on_device(where.device_id, work) : work();
  }
  raise_if_failed(status);
}

}  // namespace

void bind_attention(nb::module_& m) {
  nb::class_<CallArgs>(m, "CallArgs")
      .def(nb::init<>())
      .def("set_input", &CallArgs::set_input, nb::arg("name"), nb::arg("array"), nb::arg("type"))
      .def("set_output", &CallArgs::set_output, nb::arg("name"), nb::arg("array"), nb::arg("type"))
      .def("set_options", &CallArgs::set_options, nb::kw_only(), nb::arg("causal"),
           nb::arg("window"), nb::arg("scale").none(), nb::arg("page_size"), nb::arg("block_q"),
           nb::arg("block_k"), nb::arg("v_scale_axis"), nb::arg("split_kv"), nb::arg("tile_m"),
           nb::arg("tile_n"), nb::arg("early_exit"))
      .def_prop_ro("on_gpu", [](const CallArgs& c) { return c.placement().on_gpu; })
      .def_prop_ro("device_id", [](const CallArgs& c) { return c.placement().device_id; });

  nb::class_<DecodeStep>(m, "DecodeStep")
      .def(nb::init<const CallArgs&>(), nb::arg("call"))
      .def("run", &DecodeStep::run, nb::arg("stream"))
      .def_prop_ro("partial_slots", &DecodeStep::partial_slots)
      .def_prop_ro("split_blocks", &DecodeStep::split_blocks)
      .def_prop_ro("combines", &DecodeStep::combines)
      .def_prop_ro("device_id", &DecodeStep::device_id);

  m.def("cuda_engine_built", &cuda_engine_built);
  m.def("build_info", [] {
    const BuildInfo info = mxattn::build_info();
    nb::dict d;
    d["version"] = info.version;
    d["cuda"] = info.cuda;
    d["cuda_prefill"] = info.cuda_prefill;
    d["cuda_architectures"] = info.cuda_architectures;
    nb::list sets;
    for (const std::string& s : info.cpu_kernel_sets) sets.append(s);
    d["cpu_kernel_sets"] = sets;
    d["cpu_kernel_set"] = info.cpu_kernel_set;
    return d;
  });
  m.def("output_shapes", &output_shapes, nb::arg("call"), nb::arg("engine"), nb::arg("partials"));
  m.def("run", &run, nb::arg("call"), nb::arg("engine"), nb::arg("threads"), nb::arg("stream"));
  m.def("split_plan", &split_plan, nb::arg("call"), nb::arg("engine"));
  nb::class_<BatchPlanHandle>(m, "BatchPlan")
      .def(nb::init<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                    const std::string&, const std::string&, const std::string&, const std::string&,
                    const std::string&, int64_t, std::optional<float>, bool, int32_t,
                    const std::string&>(),
           nb::arg("max_sequences"), nb::arg("max_query_rows"), nb::arg("max_kv_len"),
           nb::arg("page_size"), nb::arg("num_pages"), nb::arg("heads_q"), nb::arg("heads_kv"),
           nb::arg("dim_qk"), nb::arg("dim_v"), nb::arg("q_type"), nb::arg("k_type"),
           nb::arg("v_type"), nb::arg("o_type"), nb::arg("causal"), nb::arg("window"),
           nb::arg("scale").none(), nb::arg("lse"), nb::arg("split_kv"), nb::arg("engine"))
      .def("run", &BatchPlanHandle::run, nb::arg("call"));
  m.def("run_ragged", &run_ragged, nb::arg("call"), nb::arg("engine"), nb::arg("threads"));
  m.def("combine", &combine_partials, nb::arg("partial_o"), nb::arg("partial_o_type"),
        nb::arg("partial_lse"), nb::arg("counts"), nb::arg("o"), nb::arg("o_type"),
        nb::arg("lse").none(), nb::arg("threads"), nb::arg("stream"));
  m.def("merge_states", &merge_state_arrays, nb::arg("o_a"), nb::arg("o_a_type"), nb::arg("lse_a"),
        nb::arg("o_b"), nb::arg("o_b_type"), nb::arg("lse_b"), nb::arg("o"), nb::arg("o_type"),
        nb::arg("lse").none(), nb::arg("stream"));
}

}  // namespace mxattn::python
