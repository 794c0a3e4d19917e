#!/usr/bin/env python3
"""Held-out perplexity of a model in Tandem and from llama.cpp's logits of the same windows.

Tokenizes TEXT with `tandem tokenize`, then for each window of --ctx tokens side by side takes
llama.cpp's teacher-forced logits (the oracle kit's llama_logits --all-logits --kv f32) and scores
positions ctx/2+1 .. ctx-1, as llama-perplexity and `tandem perplexity` do; prints both figures
and fails when they differ by more than --tolerance (relative). Needs the oracle kit's
environment (eval "$(../shared/oracle/setup.sh)"). Standard library only (numpy when present).

  tools/demo_model_vs_llama.py [--model models/kjv-moe.gguf] [--text models/kjv-heldout.txt]
"""
import argparse
import array
import math
import os
import re
import subprocess
import sys
import tempfile

try:
    import numpy
except ImportError:
    numpy = None


def row_nll(row, target):
    if numpy is not None:
        r = numpy.asarray(row, dtype=numpy.float64)
        m = r.max()
        return float(m + math.log(numpy.exp(r - m).sum()) - r[target])
    m = max(row)
    return m + math.log(sum(math.exp(x - m) for x in row)) - row[target]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/kjv-moe.gguf")
    ap.add_argument("--text", default="models/kjv-heldout.txt")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=0, help="only the first N windows")
    ap.add_argument("--tandem", default="build/tandem")
    ap.add_argument("--tolerance", type=float, default=0.005)
    args = ap.parse_args()
    llama_logits = os.path.join(os.environ.get("ORACLE_BIN", ""), "llama_logits")
    if not os.access(llama_logits, os.X_OK):
        sys.exit("demo_model_vs_llama: no llama_logits in $ORACLE_BIN (eval \"$(../shared/oracle/setup.sh)\")")

    ids = [int(t) for t in subprocess.run([args.tandem, "tokenize", "-m", args.model, "-f", args.text],
                                          check=True, capture_output=True, text=True).stdout.split()]
    ctx = args.ctx
    first = ctx // 2 + 1
    n_windows = len(ids) // ctx
    if args.chunks:
        n_windows = min(n_windows, args.chunks)
    cmd = [args.tandem, "perplexity", "-m", args.model, "-f", args.text, "--ctx", str(ctx), "--kv-type", "f32"]
    if args.chunks:
        cmd += ["--chunks", str(args.chunks)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"PPL = ([0-9.]+)", out)
    if not m:
        sys.exit(f"demo_model_vs_llama: no 'PPL = ' in tandem's output: {out!r}")
    ours = float(m.group(1))

    nll, n = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "logits.f32")
        for k in range(n_windows):
            window = ids[k * ctx : (k + 1) * ctx]
            subprocess.run([llama_logits, args.model, "--kv", "f32", "--all-logits", "--ctx", str(ctx),
                            "--tokens", ",".join(map(str, window)), "--dump", dump],
                           check=True, capture_output=True)
            logits = array.array("f")
            with open(dump, "rb") as f:
                logits.frombytes(f.read())
            n_vocab = len(logits) // ctx
            for t in range(first, ctx):
                nll += row_nll(logits[(t - 1) * n_vocab : t * n_vocab], window[t])
                n += 1
            print(f"\r[{k + 1}/{n_windows}] llama.cpp {math.exp(nll / n):.4f}", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    theirs = math.exp(nll / n)
    print(f"held-out perplexity, {n_windows} windows of {ctx} ({n} tokens scored): "
          f"tandem {ours:.4f}, llama.cpp's logits {theirs:.4f} (ratio {ours / theirs:.6f})")
    if abs(ours / theirs - 1) > args.tolerance:
        sys.exit(f"demo_model_vs_llama: they differ by more than {args.tolerance:.1%}")


if __name__ == "__main__":
    main()
