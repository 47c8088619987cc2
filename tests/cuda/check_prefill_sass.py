#!/usr/bin/env python3
"""Static checks of the prefill kernels' machine code (SASS), run without a GPU.

Reads the SASS of every prefill kernel instance in the given files (the mxattn library, object
files or cubins) with cuobjdump, finds each instance's key loop (the loop whose body holds the
most wgmma instructions: one pass per key tile) and prints, per instance, the loop's length, its
wgmma and local-memory instructions, and how many of its exponentials come before the loop's wait
for all wgmma groups (the wait for the P V GEMM). Checks, chosen with --require:

  local    no local memory (spills) in the key loop of the bf16 and f16 instances;
  overlap  every exponential of the key loop before that wait: the softmax of a key tile runs while
           the P V GEMM of the tile before is in flight (FlashAttention-3's intra-warpgroup
           overlap), which ptxas undoes by moving the wait up unless something orders it. Not
           required on main: ordering it measured slower.

Exits 1 when a required check fails, when no instance or no key loop is found, or when cuobjdump
cannot read the files (it needs nvdisasm beside it or on PATH; scripts/fetch_cuda_tools.sh installs
both where the CUDA toolkit lacks them).
"""
import argparse
import re
import subprocess
import sys

FUNCTION = re.compile(r"^\s*Function : (\S+)")
INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
# prefill_kernel<KernelTraits<Element, Dqk, Dv, kQCodes>> as mangled by nvcc.
INSTANCE = re.compile(
    r"prefill_kernel.*KernelTraitsIN7cutlass(10bfloat16_t|6half_t)ELi(\d+)ELi(\d+)ELb([01])E")
BRANCH = re.compile(r"\bBRA\b.*?0x([0-9a-f]+)")
LARGEST_LOOP = 3000  # instructions; the kernel's outer loops are longer


def read_functions(cuobjdump, paths):
    """{mangled name: [(address, instruction text)]} of every function in the files."""
    functions = {}
    for path in paths:
        try:
            run = subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True)
        except FileNotFoundError:
            sys.exit(f"{cuobjdump} not found: scripts/fetch_cuda_tools.sh installs it")
        if run.returncode != 0:
            sys.exit(f"{cuobjdump} -sass {path} failed: {run.stderr.strip()}")
        current = None
        for line in run.stdout.splitlines():
            m = FUNCTION.match(line)
            if m:
                current = functions.setdefault(m.group(1), [])
                continue
            m = INSTRUCTION.match(line)
            if m and current is not None:
                current.append((int(m.group(1), 16), m.group(2)))
    return functions


def key_loop(instructions):
    """The body of the backward branch holding the most wgmma instructions (ties: shortest)."""
    index = {address: i for i, (address, _) in enumerate(instructions)}
    best = None
    for i, (address, text) in enumerate(instructions):
        m = BRANCH.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= address or target not in index:
            continue
        body = [t for _, t in instructions[index[target]:i + 1]]
        if len(body) > LARGEST_LOOP:
            continue
        key = (sum("HGMMA" in t for t in body), -len(body))
        if best is None or key > best[0]:
            best = (key, body)
    return best[1] if best and best[0][0] > 0 else None


def describe(body):
    full_waits = [i for i, t in enumerate(body) if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in t]
    exps = [i for i, t in enumerate(body) if "MUFU.EX2" in t]
    last_wait = full_waits[-1] if full_waits else -1
    return {
        "length": len(body),
        "wgmma": sum("HGMMA" in t for t in body),
        "local": sum(bool(re.search(r"\b(LDL|STL)\b", t)) for t in body),
        "exps": len(exps),
        "exps_before_wait": sum(i < last_wait for i in exps),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuobjdump", default="cuobjdump")
    parser.add_argument("--require", default="", help="comma-separated: local, overlap")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    required = {r for r in args.require.split(",") if r}
    unknown = required - {"local", "overlap"}
    if unknown:
        sys.exit(f"unknown checks: {', '.join(sorted(unknown))}")

    rows = []
    for name, instructions in read_functions(args.cuobjdump, args.files).items():
        m = INSTANCE.search(name)
        if not m:
            continue
        element = "bf16" if m.group(1) == "10bfloat16_t" else "f16"
        q_codes = m.group(4) == "1"
        label = f"{'mxq' if q_codes else element} Dqk {m.group(2)} Dv {m.group(3)}"
        order = (q_codes, element, int(m.group(2)), int(m.group(3)))
        body = key_loop(instructions)
        if body is None:
            print(f"{label}: no loop with wgmma instructions found")
            return 1
        rows.append((order, label, q_codes, describe(body)))
    if not rows:
        print("no prefill kernel instances in " + " ".join(args.files))
        return 1

    failures = []
    print(f"{'instance':<22} {'loop':>5} {'wgmma':>6} {'local':>6} {'exp before the P V wait':>24}")
    for _, label, q_codes, d in sorted(rows):
        print(f"{label:<22} {d['length']:>5} {d['wgmma']:>6} {d['local']:>6} "
              f"{d['exps_before_wait']:>18} of {d['exps']:<3}")
        if "local" in required and not q_codes and d["local"]:
            failures.append(f"{label}: {d['local']} local-memory instructions in the key loop")
        if "overlap" in required and d["exps_before_wait"] < d["exps"]:
            failures.append(f"{label}: {d['exps'] - d['exps_before_wait']} of {d['exps']} "
                            "exponentials after the wait for the P V GEMM")
    for f in failures:
        print("FAIL " + f)
    print(f"{len(rows)} instances, checks: {', '.join(sorted(required)) or 'none'}: "
          f"{'failed' if failures else 'passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
