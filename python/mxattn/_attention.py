"""Attention, its split plan, the planned GPU decode step and the combine of split partials."""

from __future__ import annotations

from typing import NamedTuple

from . import _arrays
from . import _mxattn


class SparseLayout(NamedTuple):
    """Block-sparse layout in BSR form over query blocks (spec §6): row_ptr int32
    [Bx, Hx, ceil(Sq / block_q) + 1] and col_idx int32 [Bx, Hx, nnz_max], Bx in {1, B} and Hx in
    {1, Hq} (1 broadcasts); key blocks listed per query block, sorted."""

    block_q: int
    block_k: int
    row_ptr: object
    col_idx: object


def _formats3(formats):
    """Per tensor (q, k, v): the element type `formats=` names, and whether that name was given
    once for all three. A single name types only the byte tensors, so bf16 Q with MXFP8 K/V is
    `formats="e4m3"`."""
    if formats is None or isinstance(formats, str):
        return (formats,) * 3, True
    formats = tuple(formats)
    if len(formats) != 3:
        raise ValueError(f"formats must name one element type or three (q, k, v), found {formats!r}")
    return formats, False


def _element_type(name, x, named, shared):
    """The element type of q, k or v: its dtype's, or the MX type `formats=` names for bytes."""
    if named is None:
        return None
    storage = _arrays.dtype_name(x)
    inferred = _arrays.TYPE_OF_DTYPE.get(storage)
    if inferred in ("f32", "f16", "bf16") and shared:
        return None
    canonical = _mxattn.canonical_type(named)
    if inferred is not None and inferred != canonical:
        raise ValueError(f"{name} is {storage} but formats= names it {named}")
    return canonical


def _causal_name(causal, prefix_offset):
    if prefix_offset is not None:
        if causal not in (None, "prefix"):
            raise ValueError(f"prefix_offset is given with causal={causal!r}: prefix-causal takes "
                             "causal=None (or 'prefix')")
        return "prefix"
    if causal is None or causal is False:
        return "none"
    if causal is True:
        return "top_left"
    return str(causal)


def _split_kv_value(split_kv):
    if split_kv == "auto":
        return 0
    if isinstance(split_kv, bool) or not isinstance(split_kv, int) or split_kv < 1:
        raise ValueError(f"split_kv must be an int >= 1 or 'auto', found {split_kv!r}")
    return split_kv


def _call(q, k, v, *, causal, prefix_offset, kv_len, window, scale, split_kv, sparse,
          block_table, q_scales, k_scales, v_scales, formats, v_scale_axis, k_mean, tile_m,
          tile_n, early_exit):
    call = _mxattn.CallArgs()
    batch = q.shape[0] if len(getattr(q, "shape", ())) > 0 else None
    named, shared = _formats3(formats)
    for name, x, fmt in zip(("q", "k", "v"), (q, k, v), named):
        array, element_type = _arrays.transport(name, x, _element_type(name, x, fmt, shared))
        call.set_input(name, array, element_type)
    for name, x in (("q_scales", q_scales), ("k_scales", k_scales), ("v_scales", v_scales)):
        if x is not None:
            array, _ = _arrays.transport(name, x, "e8m0")
            call.set_input(name, array, "e8m0")
    if k_mean is not None:
        call.set_input("k_mean", *_arrays.transport("k_mean", k_mean))
    metadata = {"kv_len": _arrays.host_int32("kv_len", kv_len, batch),
                "prefix_offset": _arrays.host_int32("prefix_offset", prefix_offset, batch),
                "block_table": _arrays.host_int32("block_table", block_table)}
    block_q = block_k = 0
    if sparse is not None:
        layout = SparseLayout(**sparse) if isinstance(sparse, dict) else SparseLayout(*sparse)
        block_q, block_k = int(layout.block_q), int(layout.block_k)
        metadata["row_ptr"] = _arrays.host_int32("row_ptr", layout.row_ptr)
        metadata["col_idx"] = _arrays.host_int32("col_idx", layout.col_idx)
    for name, array in metadata.items():
        if array is not None:
            call.set_input(name, array, "i32")
    if window is not None and (isinstance(window, bool) or int(window) < 0):
        raise ValueError(f"window must be None or an int >= 0, found {window!r}")
    page_size = 0
    if block_table is not None:
        if len(getattr(k, "shape", ())) != 4:
            raise ValueError("block_table is given: K must be paged, [num_pages, page_size, Hkv, "
                             f"Dqk], found shape {tuple(getattr(k, 'shape', ()))}")
        page_size = int(k.shape[1])
    call.set_options(causal=_causal_name(causal, prefix_offset),
                     window=-1 if window is None else int(window),
                     scale=None if scale is None else float(scale), page_size=page_size,
                     block_q=block_q, block_k=block_k, v_scale_axis=v_scale_axis,
                     split_kv=_split_kv_value(split_kv), tile_m=int(tile_m), tile_n=int(tile_n),
                     early_exit=bool(early_exit))
    return call


def _out_type(q, out_dtype):
    if out_dtype is not None:
        return _mxattn.canonical_type(out_dtype)
    own = _arrays.TYPE_OF_DTYPE.get(_arrays.dtype_name(q))
    return own if own in ("f32", "f16", "bf16") else "f32"


class _Outputs:
    """The outputs of a call, made in the caller's framework and set on the call."""

    def __init__(self, call, q, engine, *, out, out_dtype, return_lse, return_partials):
        shapes = _mxattn.output_shapes(call, engine, bool(return_partials))
        self.like = q
        if out is None:
            out = _arrays.empty_like_framework(q, shapes["o"], _out_type(q, out_dtype))
        self.o = out
        call.set_output("o", *_arrays.transport("out", out))
        self.lse = self._make(call, "lse", shapes["lse"], "f32") if return_lse else None
        self.partials = None
        if return_partials:
            slots = shapes["slots"]
            self.partials = (self._make(call, "partial_o", (slots, *shapes["o"]), "f32"),
                             self._make(call, "partial_lse", (slots, *shapes["lse"]), "f32"),
                             self._make(call, "counts", shapes["lse"], "i32"))

    def _make(self, call, name, shape, element_type):
        array = _arrays.empty_like_framework(self.like, shape, element_type)
        call.set_output(name, *_arrays.transport(name, array))
        return array

    def result(self):
        convert = lambda a: _arrays.to_framework_of(self.like, a)  # noqa: E731
        results = [convert(self.o)]
        if self.lse is not None:
            results.append(convert(self.lse))
        if self.partials is not None:
            results.extend(convert(a) for a in self.partials)
        return results[0] if len(results) == 1 else tuple(results)


def attention(q, k, v, *, causal=None, prefix_offset=None, kv_len=None, window=None, scale=None,
              split_kv=1, return_lse=False, sparse=None, block_table=None, out=None,
              out_dtype=None, q_scales=None, k_scales=None, v_scales=None, formats=None,
              v_scale_axis="head_dim", k_mean=None, tile_m=0, tile_n=0, early_exit=False,
              return_partials=False, engine="auto", threads=0, stream=None):
    """Exact attention forward, O = softmax(scale * Q K^T + mask) V (mxattn's spec (docs/spec.md)).

    q [B, Sq, Hq, Dqk], k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv] (BSHD, any strides), from any
    DLPack framework (NumPy, PyTorch, CuPy, JAX), on the host or one GPU, read in place. f32, f16
    and bf16 tensors carry their own type; MX data comes as uint8 bytes (FP6/FP4 packed along the
    head dim) with `formats=` naming its element type (one name for every byte tensor, or a
    (q, k, v) triple) and E8M0 scales in q_scales/k_scales/v_scales.

    causal: None, "top_left" (PyTorch is_causal) or "bottom_right" (FlashAttention >= 2.1);
    prefix_offset (int or per batch) selects prefix-causal. kv_len (int or per batch): valid keys.
    window: sliding window W. split_kv: splits per query tile (int) or "auto". block_table
    (int32 [B, max_pages]) makes k and v page pools [num_pages, page_size, Hkv, D]. sparse: a
    SparseLayout. engine: "auto" (the CUDA engine for GPU tensors, else the fast CPU engine),
    "cpu", "reference" (f64 loops) or "cuda".

    Returns O in q's framework and on q's device (f32 for MX q unless out_dtype= or out= says
    otherwise); with return_lse also LSE f32 [B, Hq, Sq] (natural log); with return_partials also
    the split partials O_s f32 [S, B, Sq, Hq, Dv], L_s f32 [S, B, Hq, Sq] and the exact counts
    int32 [B, Hq, Sq] that combine() merges. Invalid arguments raise ValueError with the library's
    message; nothing is written then."""
    call = _call(q, k, v, causal=causal, prefix_offset=prefix_offset, kv_len=kv_len,
                 window=window, scale=scale, split_kv=split_kv, sparse=sparse,
                 block_table=block_table, q_scales=q_scales, k_scales=k_scales,
                 v_scales=v_scales, formats=formats, v_scale_axis=v_scale_axis, k_mean=k_mean,
                 tile_m=tile_m, tile_n=tile_n, early_exit=early_exit)
    outputs = _Outputs(call, q, engine, out=out, out_dtype=out_dtype, return_lse=return_lse,
                       return_partials=return_partials)
    if stream is None:
        stream = _arrays.current_stream(q, call.on_gpu)
    _mxattn.run(call, engine, int(threads), int(stream))
    return outputs.result()


def ragged_attention(q, k, v, query_start_loc, seq_lens, *, causal=None, prefix_offset=None,
                     window=None, scale=None, split_kv="auto", block_table=None, q_scales=None,
                     k_scales=None, v_scales=None, formats=None, v_scale_axis="head_dim",
                     k_mean=None, out=None, out_dtype=None, return_lse=False, engine="auto",
                     threads=0):
    """Attention over a ragged batch (spec §10) in one call: sequences of different numbers of
    query rows (prefill chunks beside one-row decodes, or none) over one dense or paged cache.

    q [total_q, Hq, Dqk] packed by sequence: sequence b owns rows query_start_loc[b] ..
    query_start_loc[b + 1] - 1 (vLLM's query_start_loc, int32 [B + 1]); seq_lens int32 [B]: its
    keys. k, v: dense [B, Sk, Hkv, D], or paged pools [pages, page_size, Hkv, D] with
    block_table [B, max_pages]. Masks apply per sequence with its own row index: causal=
    "bottom_right" makes a chunk's last row see the sequence's last key. Returns O [total_q, Hq,
    Dv] (and LSE f32 [Hq, total_q] with return_lse); a sequence's rows are, bitwise, those of one
    padded call with that sequence alone. Runs on the CPU engines (host tensors); the other
    arguments are attention()'s."""
    lengths = _arrays.host_int32("seq_lens", seq_lens)
    starts = _arrays.host_int32("query_start_loc", query_start_loc)
    offsets = None if prefix_offset is None else _arrays.host_int32("prefix_offset", prefix_offset)
    call = _call(q, k, v, causal=causal, prefix_offset=offsets, kv_len=lengths, window=window,
                 scale=scale, split_kv=split_kv, sparse=None, block_table=block_table,
                 q_scales=q_scales, k_scales=k_scales, v_scales=v_scales, formats=formats,
                 v_scale_axis=v_scale_axis, k_mean=k_mean, tile_m=0, tile_n=0,
                 early_exit=False)
    call.set_input("cu_seqlens_q", starts, "i32")
    shape = tuple(q.shape)
    if len(shape) != 3:
        raise ValueError(f"q must be [total_q, Hq, Dqk], found shape {shape}")
    dim_v = int(v.shape[-1]) if len(getattr(v, "shape", ())) == 4 else 0
    if out is None:
        out = _arrays.empty_like_framework(q, (shape[0], shape[1], dim_v), _out_type(q, out_dtype))
    call.set_output("o", *_arrays.transport("out", out))
    lse = None
    if return_lse:
        lse = _arrays.empty_like_framework(q, (shape[1], shape[0]), "f32")
        call.set_output("lse", *_arrays.transport("lse", lse))
    _mxattn.run_ragged(call, engine, int(threads))
    if lse is None:
        return _arrays.to_framework_of(q, out)
    return _arrays.to_framework_of(q, out), _arrays.to_framework_of(q, lse)


class BatchAttention:
    """Attention for a serving loop (spec §12): planned once for capacities, run for every layer
    and step with that step's tensors and metadata, named as vLLM names them.

    plan: max_sequences, max_query_rows, max_kv_len, and for paged caches page_size and
    num_pages (0: dense caches [max_sequences, max_kv_len, Hkv, D]); heads_q, heads_kv, head_dim
    (or head_dim_qk and head_dim_v); formats (q, k, v) as element type names ("bf16", "e4m3", ...;
    one name for all three, or a triple), out_dtype, causal ("bottom_right" by default: a chunk's
    last row sees its sequence's last key), window, scale, return_lse, split_kv. Runs on the CPU
    engines in this version."""

    def __init__(self, *, max_sequences, max_query_rows, max_kv_len, heads_q, heads_kv,
                 head_dim=None, head_dim_qk=None, head_dim_v=None, page_size=0, num_pages=0,
                 formats="bf16", out_dtype="bf16", causal="bottom_right", window=None,
                 scale=None, return_lse=False, split_kv="auto", engine="auto"):
        dim_qk = head_dim_qk if head_dim_qk is not None else head_dim
        dim_v = head_dim_v if head_dim_v is not None else head_dim
        if dim_qk is None or dim_v is None:
            raise ValueError("head_dim (or head_dim_qk and head_dim_v) is required")
        named = (formats,) * 3 if isinstance(formats, str) else tuple(formats)
        if len(named) != 3:
            raise ValueError(f"formats must be one name or a (q, k, v) triple, found {formats!r}")
        self._formats = tuple(_mxattn.canonical_type(f) for f in named)
        self._return_lse = bool(return_lse)
        self._out_dtype = _mxattn.canonical_type(out_dtype)
        self._plan = _mxattn.BatchPlan(
            int(max_sequences), int(max_query_rows), int(max_kv_len), int(page_size),
            int(num_pages), int(heads_q), int(heads_kv), int(dim_qk), int(dim_v), *self._formats,
            self._out_dtype, "none" if causal is None else str(causal),
            -1 if window is None else int(window), None if scale is None else float(scale),
            self._return_lse, _split_kv_value(split_kv),
            "cpu" if engine == "auto" else str(engine))

    def run(self, q, k_cache, v_cache, query_start_loc, seq_lens, block_table=None, *,
            q_scales=None, k_scales=None, v_scales=None, out=None):
        """One layer of one step: q [total_q, Hq, Dqk] packed by sequence, the caches, and the
        step's metadata (query_start_loc int32 [B + 1], seq_lens int32 [B], block_table int32
        [B, pages per sequence]). Returns O [total_q, Hq, Dv] (and LSE [Hq, total_q] where the
        plan asks)."""
        mx = [f for f in self._formats if f not in ("f32", "f16", "bf16")]
        call = _call(q, k_cache, v_cache, causal=None, prefix_offset=None,
                     kv_len=_arrays.host_int32("seq_lens", seq_lens), window=None, scale=None,
                     split_kv=1, sparse=None, block_table=block_table, q_scales=q_scales,
                     k_scales=k_scales, v_scales=v_scales,
                     formats=self._formats if mx else None, v_scale_axis="head_dim",
                     k_mean=None, tile_m=0, tile_n=0, early_exit=False)
        call.set_input("cu_seqlens_q", _arrays.host_int32("query_start_loc", query_start_loc),
                       "i32")
        shape = tuple(q.shape)
        if out is None:
            dim_v = int(v_cache.shape[-1])
            if self._formats[2] not in ("f32", "f16", "bf16"):
                dim_v = dim_v * 8 // _mxattn.element_bits(self._formats[2])  # packed bytes
            out = _arrays.empty_like_framework(q, (shape[0], shape[1], dim_v), self._out_dtype)
        call.set_output("o", *_arrays.transport("out", out))
        lse = None
        if self._return_lse:
            lse = _arrays.empty_like_framework(q, (shape[1], shape[0]), "f32")
            call.set_output("lse", *_arrays.transport("lse", lse))
        self._plan.run(call)
        if lse is None:
            return _arrays.to_framework_of(q, out)
        return _arrays.to_framework_of(q, out), _arrays.to_framework_of(q, lse)


def plan(q, k, v, *, causal=None, prefix_offset=None, kv_len=None, window=None, split_kv=1,
         sparse=None, block_table=None, q_scales=None, k_scales=None, v_scales=None,
         formats=None, v_scale_axis="head_dim", tile_m=0, tile_n=0, engine="auto"):
    """The split-KV partition (spec §3) that `attention` with the same arguments runs on `engine`,
    as `mxattn plan` prints it: a dict with the engine that runs it ("cpu-fast", "cpu-reference",
    "cuda-decode" or "cuda-prefill"), the resolved tile_m, tile_n, split_kv and
    partial_slots, and under "tiles" one dict per query tile: b, h (None: every head shares it),
    rows (first, last), key_tiles, split_kv, count (exact valid-split count), splits (per split:
    tiles, key_tiles (first, last) and keys (first, last), or None when empty) and
    conservative_counts (rocMLIR's per-row counts). Tensor contents are not read."""
    call = _call(q, k, v, causal=causal, prefix_offset=prefix_offset, kv_len=kv_len,
                 window=window, scale=None, split_kv=split_kv, sparse=sparse,
                 block_table=block_table, q_scales=q_scales, k_scales=k_scales,
                 v_scales=v_scales, formats=formats, v_scale_axis=v_scale_axis, k_mean=None,
                 tile_m=tile_m, tile_n=tile_n, early_exit=False)
    return _mxattn.split_plan(call, engine)


class DecodePlan:
    """A decode step on the CUDA engine, planned once (validation, tile schedule and workspace on
    the GPU) and run many times without allocation or host synchronization, so `run()` can be
    captured in a CUDA graph and replayed. It keeps q, k, v (and out, lse) and reads their
    current contents at each run: update them in place between steps.

    Takes attention()'s arguments (GPU tensors; metadata such as kv_len is copied at planning).
    """

    def __init__(self, q, k, v, *, causal=None, prefix_offset=None, kv_len=None, window=None,
                 scale=None, split_kv="auto", return_lse=False, block_table=None, out=None,
                 out_dtype=None, q_scales=None, k_scales=None, v_scales=None, formats=None,
                 v_scale_axis="head_dim", tile_m=0, tile_n=0):
        call = _call(q, k, v, causal=causal, prefix_offset=prefix_offset, kv_len=kv_len,
                     window=window, scale=scale, split_kv=split_kv, sparse=None,
                     block_table=block_table, q_scales=q_scales, k_scales=k_scales,
                     v_scales=v_scales, formats=formats, v_scale_axis=v_scale_axis, k_mean=None,
                     tile_m=tile_m, tile_n=tile_n, early_exit=False)
        if not call.on_gpu:
            raise ValueError("DecodePlan runs the CUDA engine: q, k and v must be on a GPU")
        self._outputs = _Outputs(call, q, "cuda", out=out, out_dtype=out_dtype,
                                 return_lse=return_lse, return_partials=False)
        self._q = q
        self._step = _mxattn.DecodeStep(call)

    @property
    def out(self):
        return self._outputs.o

    @property
    def lse(self):
        return self._outputs.lse

    @property
    def partial_slots(self) -> int:
        return self._step.partial_slots

    def run(self, stream=None):
        """Launches the step on `stream` (default: the framework's current stream, so inside
        torch.cuda.graph() it is captured). Returns out, or (out, lse)."""
        if stream is None:
            stream = _arrays.current_stream(self._q, True)
        self._step.run(int(stream))
        return self._outputs.result()


def combine(partials, lses, counts, *, out=None, out_dtype=None, return_lse=False, threads=0,
            stream=None):
    """spec §3's NaN-safe merge of split partials, on the host or the GPU holding them: partials
    [S, B, Sq, Hq, Dv] (f32, f16 or bf16), lses f32 [S, B, Hq, Sq] (natural log), counts int32
    [B, Hq, Sq] (splits to read per row; splits at or past a row's count are never read; on a GPU
    counts are clamped to [0, S]). Returns O [B, Sq, Hq, Dv] (and LSE [B, Hq, Sq] with return_lse)
    in the framework of `partials`. On a GPU the work is queued on `stream` (default: the
    framework's current stream)."""
    partial_array, partial_type = _arrays.transport("partials", partials)
    lse_array, _ = _arrays.transport("lses", lses)
    counts_array, _ = _arrays.transport("counts", counts)
    # A partials tensor of another rank is reported by the library's check, before any write.
    shape = tuple(partials.shape) if len(partials.shape) == 5 else (1, 1, 1, 1, 1)
    if out is None:
        own = partial_type if partial_type in ("f32", "f16", "bf16") else "f32"
        out = _arrays.empty_like_framework(
            partials, shape[1:],
            _mxattn.canonical_type(out_dtype) if out_dtype is not None else own)
    out_array, out_type = _arrays.transport("out", out)
    lse = None
    if return_lse:
        lse = _arrays.empty_like_framework(partials, (shape[1], shape[3], shape[2]), "f32")
    if stream is None:
        stream = _arrays.current_stream(partials, _arrays.device_of(partials)[0])
    _mxattn.combine(partial_array, partial_type, lse_array, counts_array, out_array, out_type,
                    None if lse is None else _arrays.transport("lse", lse)[0], int(threads),
                    int(stream))
    if lse is None:
        return _arrays.to_framework_of(partials, out)
    return _arrays.to_framework_of(partials, out), _arrays.to_framework_of(partials, lse)


def merge_states(o_a, lse_a, o_b, lse_b, *, out=None, out_lse=None, stream=None):
    """Merges two attention states over disjoint key sets into the state over their union (spec
    §3's combine of two splits): o_a, o_b [N, H, D] (f32, f16 or bf16) with their LSE f32 [N, H]
    (natural log; -inf for a row that saw no key), e.g. attention over a shared prefix and over
    each sequence's suffix (cascade). Returns (O, LSE) in o_a's framework and memory; out and
    out_lse may be o_a and lse_a (in place)."""
    a, a_type = _arrays.transport("o_a", o_a)
    b, b_type = _arrays.transport("o_b", o_b)
    if out is None:
        out = _arrays.empty_like_framework(o_a, tuple(o_a.shape), a_type)
    if out_lse is None:
        out_lse = _arrays.empty_like_framework(o_a, tuple(lse_a.shape), "f32")
    out_array, out_type = _arrays.transport("out", out)
    if stream is None:
        stream = _arrays.current_stream(o_a, _arrays.device_of(o_a)[0])
    _mxattn.merge_states(a, a_type, _arrays.transport("lse_a", lse_a)[0], b, b_type,
                         _arrays.transport("lse_b", lse_b)[0], out_array, out_type,
                         _arrays.transport("out_lse", out_lse)[0], int(stream))
    return _arrays.to_framework_of(o_a, out), _arrays.to_framework_of(o_a, out_lse)
