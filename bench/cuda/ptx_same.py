#!/usr/bin/env python3
"""Which kernel instantiations of a .cu file compile to the same PTX at two revisions.

Run 26 (docs/bench/cuda.md): with no GPU time left, a kernel change was kept only where
every instantiation's PTX equals that of a binary already tested and timed on the H200
(the same PTX through the same ptxas gives the same SASS). Usage, from the project root
with a configured CUDA build dir:

  bench/cuda/ptx_same.py build/h-cuda2 src/kernels/attention_cuda/decode_turbo_mma_cuda.cu \\
      --rev 673597d [--rev-flags -DX=1] [--flags -DY=2] [--other-file PATH]

compares the working tree's file (with --flags) against the file at --rev (or the file
--other-file, with --rev-flags) and prints, per __global__ instantiation, same / differs.
Symbol names are masked (they carry the file name); everything else must match.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import tempfile


def compile_cmd(build, src):
    cmds = json.load(open(os.path.join(build, "compile_commands.json")))
    for c in cmds:
        if os.path.abspath(c["file"]) == os.path.abspath(src):
            return c["command"], c["directory"]
    raise SystemExit(f"{src} not in {build}/compile_commands.json")


def ptx(cmd, cwd, orig, src, out, flags):
    a = shlex.split(cmd)
    a = [x for x in a if not x.startswith("--generate-code")]
    if "-o" in a:
        i = a.index("-o")
        del a[i:i + 2]
    for opt in ("-MD", "-MT", "-MF"):
        while opt in a:
            i = a.index(opt)
            del a[i:i + (1 if opt == "-MD" else 2)]
    a = [x for x in a if x != "-c" and os.path.abspath(os.path.join(cwd, x)) != os.path.abspath(orig)]
    a += ["-arch=compute_90", "-ptx", src, "-o", out] + flags
    subprocess.run(a, cwd=cwd, check=True)
    text = open(out).read()
    kernels = {}
    for part in text.split(".entry ")[1:]:
        name = part.split("(", 1)[0]
        key = re.sub(r"^.*_cu_[0-9a-f]{8}", "", name)  # drop the file-derived namespace prefix
        kernels[key] = re.sub(r"\b_Z\w+", "SYM", part)
    return kernels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("file")
    ap.add_argument("--rev", default="HEAD")
    ap.add_argument("--other-file", default="")
    ap.add_argument("--flags", default="")
    ap.add_argument("--rev-flags", default="")
    a = ap.parse_args()
    cmd, cwd = compile_cmd(a.build, a.file)
    with tempfile.TemporaryDirectory() as d:
        old = os.path.join(d, "old_" + os.path.basename(a.file))
        if a.other_file:
            open(old, "w").write(open(a.other_file).read())
        else:
            open(old, "w").write(subprocess.run(["git", "show", f"{a.rev}:{a.file}"], capture_output=True, text=True,
                                                check=True).stdout)
        src = os.path.abspath(a.file)
        new = ptx(cmd, cwd, src, src, os.path.join(d, "new.ptx"), shlex.split(a.flags))
        ref = ptx(cmd, cwd, src, old, os.path.join(d, "old.ptx"), shlex.split(a.rev_flags))
    for k in sorted(new):
        print(("same    " if ref.get(k) == new[k] else "differs ") + k)


if __name__ == "__main__":
    main()
