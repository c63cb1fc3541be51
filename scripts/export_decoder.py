#!/usr/bin/env python3
"""Exports a tiny GPT-style decoder step with its KV cache as ONNX (torch, random weights, nothing
downloaded): OUTDIR/tiny_decoder.onnx.

One decode step over one new token: input x [1, 32] (the token's embedding), past_kL / past_vL
[2 heads, past, 16] for layers L = 0, 1 (dim_param "past"); outputs logits [1, 40] and present_kL /
present_vL [2, past + 1, 16] (past K/V with this token's appended), as Hugging Face's
decoder_with_past exports carry them. Each layer: LayerNorm, Q/K/V projections, attention over the cache
and the new position, output projection and residual, LayerNorm, GELU MLP and residual; the LM head on
the new position.

Usage: /usr/bin/python3 scripts/export_decoder.py OUTDIR
"""
import math
import os
import sys

HIDDEN, HEADS, HEAD_DIM, VOCAB, LAYERS = 32, 2, 16, 40, 2


def build():
    import torch

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(HIDDEN, HIDDEN, bias=False) for _ in range(4))
            self.up, self.down = torch.nn.Linear(HIDDEN, 2 * HIDDEN), torch.nn.Linear(2 * HIDDEN, HIDDEN)
            self.norm1, self.norm2 = torch.nn.LayerNorm(HIDDEN), torch.nn.LayerNorm(HIDDEN)

        def forward(self, x, past_k, past_v):
            t = x.shape[0]
            h = self.norm1(x)
            heads = lambda y: y.reshape(t, HEADS, HEAD_DIM).transpose(0, 1)
            q = heads(self.q(h))
            k = torch.cat([past_k, heads(self.k(h))], 1)
            v = torch.cat([past_v, heads(self.v(h))], 1)
            a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(HEAD_DIM), -1)
            x = x + self.o((a @ v).transpose(0, 1).reshape(t, HIDDEN))
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x)))), k, v

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([Layer() for _ in range(LAYERS)])
            self.head = torch.nn.Linear(HIDDEN, VOCAB)

        def forward(self, x, *past):
            present = []
            for i, layer in enumerate(self.layers):
                x, k, v = layer(x, past[2 * i], past[2 * i + 1])
                present += [k, v]
            return (self.head(x), *present)

    torch.manual_seed(0)
    return Step().eval()


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    import torch
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    past = [f"past_{kv}{i}" for i in range(LAYERS) for kv in "kv"]
    present = [f"present_{kv}{i}" for i in range(LAYERS) for kv in "kv"]
    example = (torch.randn(1, HIDDEN), *[torch.randn(HEADS, 5, HEAD_DIM) for _ in past])
    dynamic = {n: {1: "past"} for n in past}
    dynamic.update({n: {1: "total"} for n in present})
    path = os.path.join(outdir, "tiny_decoder.onnx")
    tmp = path + ".tmp"
    torch.onnx.export(build(), example, tmp, input_names=["x", *past], output_names=["logits", *present],
                      dynamic_axes=dynamic, opset_version=17)
    os.replace(tmp, path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
