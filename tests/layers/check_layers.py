#!/usr/bin/env python3
"""The layering of src/ holds: each folder includes only the layers below it (docs/design.md).

    base <- mx <- core <- engines (cpu, cuda, dist) <- api <- tools, python, bench
    workload (the problem generator) stands beside the engines, on base, mx and core.

Only src/api chooses engines and resolves their split defaults; inside src/cuda the prefill and
combine folders never include the decode folder. Prints every include that breaks a rule and exits
1, else prints a summary and exits 0.
"""
import pathlib
import re
import sys

BELOW = {
    "base": {"base"},
    "mx": {"base", "mx"},
    "core": {"base", "mx", "core"},
    "cpu": {"base", "mx", "core", "cpu"},
    "cuda": {"base", "mx", "core", "cuda"},
    "dist": {"base", "mx", "core", "dist"},
    "workload": {"base", "mx", "core", "workload"},
    "api": {"base", "mx", "core", "cpu", "cuda", "dist", "api"},
}
# Folders of src/cuda that must not reach into another one.
CUDA_APART = {"prefill": {"decode"}, "combine": {"decode", "prefill"}, "common": {"decode", "prefill"}}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def violations(src):
    found, checked = [], 0
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".cpp", ".cu", ".cuh"}:
            continue
        rel = path.relative_to(src)
        layer = rel.parts[0]
        allowed = BELOW.get(layer)
        if allowed is None:
            found.append(f"{rel}: folder src/{layer} has no place in the layering")
            continue
        checked += 1
        for top, rest in INCLUDE.findall(path.read_text()):
            if top == "mxattn":  # the public API, which every layer may use
                continue
            if top not in allowed:
                found.append(f"{rel}: includes {top}/{rest}, above src/{layer}")
            elif layer == "cuda" and top == "cuda" and len(rel.parts) > 2:
                sub, target = rel.parts[1], rest.split("/")[0]
                if target in CUDA_APART.get(sub, set()):
                    found.append(f"{rel}: cuda/{sub} includes cuda/{rest}")
    return found, checked


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2])
    found, checked = violations(root / "src")
    for line in found:
        print(line)
    if checked == 0:
        print("no sources found under", root / "src")
        return 1
    print(f"layers: {checked} files checked, {len(found)} violations")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
