#!/usr/bin/env python3
"""Greedy generation with an exported decoder and its KV cache (scripts/export_decoder.py: tiny_decoder,
gpt2_tiny_decoder, llama_tiny_decoder; the shapes are read from the model's inputs): a 4-token
prompt fed one token per step, then 8 greedy decode steps, each step's present K/V fed back as the next
step's past. `npusim run --functional` (the compiled program on the datapath, the dynamic dimension
`past` bound per step) must pick the same tokens as the FP32 reference interpreter doing the same.

The step's compiled program must run every layer on the NPU (none on the host); `--npu-ops OP=N ...`
further requires exactly N program layers of op OP (e.g. RMSNormalization=5: each RMSNorm recognised as
one layer; Expand=0: no copy of the KV heads).

REFERENCE is the reference interpreter's runner (models_reference_run) or `ort:NODE_MODULES`: onnxruntime-node
(scripts/ort_run.js, installed in NODE_MODULES by the golden fixture) runs the same 12 steps on the same
inputs, its own K/V cache fed back, as the independent reference.

Usage: check_decoder.py NPUSIM REFERENCE MODEL.onnx CONFIG.yaml [--npu-ops OP=N ...]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

PROMPT = [3, 14, 15, 9]
DECODE_STEPS = 8


def dims(model):
    """hidden, KV heads, head dim, vocab and the past input names, from the model's inputs and outputs."""
    import onnx
    g = onnx.load(model, load_external_data=False).graph
    shape = {v.name: [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim] for v in [*g.input, *g.output]}
    past = sorted((n for n in shape if n.startswith("past_")), key=lambda n: (int(n[6:]), n[5]))
    return shape["x"][1], shape[past[0]][0], shape[past[0]][2], shape["logits"][1], past


def generate(run, work, model):
    """run(step_dir_in, step_dir_out, past) computes one step; returns the tokens and every logits row."""
    HIDDEN, HEADS, HEAD_DIM, VOCAB, PAST = dims(model)
    table = np.random.RandomState(7).randn(VOCAB, HIDDEN).astype(np.float32)
    past = {n: np.zeros((HEADS, 1, HEAD_DIM), np.float32) for n in PAST}  # one zero position to start
    tokens, logits = [], []
    for step in range(len(PROMPT) + DECODE_STEPS):
        token = PROMPT[step] if step < len(PROMPT) else tokens[-1]
        d_in, d_out = os.path.join(work, f"in{step}"), os.path.join(work, f"out{step}")
        os.makedirs(d_in)
        os.makedirs(d_out)
        np.save(os.path.join(d_in, "x.npy"), table[token:token + 1])
        for n, v in past.items():
            np.save(os.path.join(d_in, n + ".npy"), v)
        n_past = past[PAST[0]].shape[1]
        run(d_in, d_out, n_past)
        row = np.load(os.path.join(d_out, "logits.npy")).reshape(-1)
        logits.append(row)
        if step >= len(PROMPT) - 1:
            tokens.append(int(np.argmax(row)))
        for n in PAST:
            present = np.load(os.path.join(d_out, n.replace("past", "present") + ".npy"))
            if present.shape != (HEADS, n_past + 1, HEAD_DIM):
                sys.exit(f"check_decoder: step {step}: {n} came back {present.shape}, expected "
                         f"{(HEADS, n_past + 1, HEAD_DIM)}")
            past[n] = present.astype(np.float32)
    return tokens, logits


def main(argv):
    if len(argv) < 5 or (len(argv) > 5 and argv[5] != "--npu-ops"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    npusim, reference, model, config = argv[1:5]
    want_ops = {op: int(n) for op, n in (a.split("=") for a in argv[6:])}

    def call(cmd, env=None):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit(f"check_decoder: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")

    with tempfile.TemporaryDirectory() as work:
        report = os.path.join(work, "step.json")
        call([npusim, "run", model, "-q", "-c", config, "--precision", "fp32", "--dynamic", "past=4", "--report", report])
        with open(report) as f:
            layers = json.load(f)["layers"]
        host = [f"{l['name']} ({l['op']})" for l in layers if l["placement"] == "host"]
        if host:
            print(f"check_decoder: layers on the host: {', '.join(host)}", file=sys.stderr)
            return 1
        for op, n in want_ops.items():
            have = sum(1 for l in layers if l["op"] == op and l["placement"] != "fused")
            if have != n:
                print(f"check_decoder: {have} program layers of op {op}, expected {n}", file=sys.stderr)
                return 1
        npu, npu_logits = generate(lambda i, o, p: call(
            [npusim, "run", model, "-q", "-c", config, "--precision", "fp32", "--functional", "--dynamic", f"past={p}", "--inputs", i,
             "--outputs", o]), os.path.join(work, "npu"), model)
        if reference.startswith("ort:"):
            env = dict(os.environ, NODE_PATH=reference[4:])
            ort_run = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "ort_run.js")
            ref, ref_logits = generate(lambda i, o, p: call(["node", ort_run, model, i, o], env),
                                       os.path.join(work, "ref"), model)
        else:
            ref, ref_logits = generate(lambda i, o, p: call([reference, model, i, o, f"past={p}"]),
                                       os.path.join(work, "ref"), model)
    worst = max(float(np.max(np.abs(a - b)) / max(1e-6, float(np.max(np.abs(b)))))
                for a, b in zip(npu_logits, ref_logits))
    print(f"npusim tokens    {npu}\n{'onnxruntime' if reference.startswith('ort:') else 'reference'} tokens {ref}\nworst logits error relative to the row's max: {worst:.2e}")
    if npu != ref:
        print("check_decoder: the greedy tokens differ", file=sys.stderr)
        return 1
    if len(set(ref)) < 2:
        print("check_decoder: a constant token stream checks nothing", file=sys.stderr)
        return 1
    if worst > 1e-3:
        print("check_decoder: logits differ by more than 1e-3 of their scale", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
