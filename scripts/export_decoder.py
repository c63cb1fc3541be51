#!/usr/bin/env python3
"""Exports decoder steps with their KV cache as ONNX (torch, random weights, nothing downloaded):
OUTDIR/NAME.onnx for each NAME (default: the three CI variants tiny_decoder, gpt2_tiny_decoder,
llama_tiny_decoder).

Every model is one decode step over one new token, with the interface of Hugging Face's
decoder_with_past exports: input x [1, hidden] (the token's embedding; the lookup is not in the graph),
past_kL / past_vL [kv_heads, past, head_dim] for each layer L (dim_param "past"); outputs logits
[1, vocab] and present_kL / present_vL [kv_heads, past + 1, head_dim] (past K/V with this token's
appended). The new token's position is the number of cached positions (past_k0's dimension 1).

  tiny_decoder        2 layers, hidden 32, 2 heads, vocab 40: LayerNorm, Q/K/V, multi-head attention over
                      the cache, output projection, LayerNorm, GELU (erf) MLP, residuals, LM head
  gpt2_tiny_decoder   GPT-2-shaped: learned position embeddings (a table sliced at the position), pre-LN
                      blocks with biased projections, GELU (tanh form, gelu_new), a final LayerNorm; 2
                      layers, hidden 32, 4 heads, vocab 48
  llama_tiny_decoder  Llama-shaped: RMSNorm (x * rsqrt(mean(x^2) + eps) * weight), rotary embeddings
                      (rotate_half with cos/sin tables sliced at the position), grouped-query attention
                      (each KV head repeated for heads / kv_heads query heads, as repeat_kv does), SwiGLU
                      FFN down(silu(gate(x)) * up(x)), no biases, a final RMSNorm; 2 layers, hidden 32,
                      4 heads, 2 KV heads, FFN 64, vocab 48
  gpt2_decoder        gpt2_tiny_decoder at GPT-2 small's shape: 12 layers, hidden 768, 12 heads, vocab
                      50257 (124 M parameters, ~500 MB)
  llama_decoder       llama_tiny_decoder at a small Llama's shape: 8 layers, hidden 1024, 16 heads, 4 KV
                      heads, FFN 2816, vocab 32000 (~170 M parameters, ~700 MB)

Usage: /usr/bin/python3 scripts/export_decoder.py OUTDIR [NAME...]
"""
import math
import os
import sys

# name: (kind, layers, hidden, heads, kv_heads, ffn, vocab)
SHAPES = {
    "tiny_decoder": ("tiny", 2, 32, 2, 2, 64, 40),
    "gpt2_tiny_decoder": ("gpt2", 2, 32, 4, 4, 128, 48),
    "llama_tiny_decoder": ("llama", 2, 32, 4, 2, 64, 48),
    "gpt2_decoder": ("gpt2", 12, 768, 12, 12, 3072, 50257),
    "llama_decoder": ("llama", 8, 1024, 16, 4, 2816, 32000),
}
CI = ["tiny_decoder", "gpt2_tiny_decoder", "llama_tiny_decoder"]
MAX_POSITIONS = 256  # rows of the position tables (learned embeddings, rotary cos/sin)


def build(kind, layers, hidden, heads, kv_heads, ffn, vocab):
    import torch
    F = torch.nn.functional
    head_dim = hidden // heads
    group = heads // kv_heads

    def split_heads(y, t, n):  # [t, n * head_dim] -> [n, t, head_dim]
        return y.reshape(t, n, head_dim).transpose(0, 1)

    def attention(q, k, v):  # q [heads, t, hd], k/v [heads, T, hd]
        a = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(head_dim), -1)
        return (a @ v).transpose(0, 1).reshape(q.shape[1], hidden)

    class TinyLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(hidden, hidden, bias=False) for _ in range(4))
            self.up, self.down = torch.nn.Linear(hidden, ffn), torch.nn.Linear(ffn, hidden)
            self.norm1, self.norm2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)

        def forward(self, x, past_k, past_v, pos):
            t = x.shape[0]
            h = self.norm1(x)
            k = torch.cat([past_k, split_heads(self.k(h), t, heads)], 1)
            v = torch.cat([past_v, split_heads(self.v(h), t, heads)], 1)
            x = x + self.o(attention(split_heads(self.q(h), t, heads), k, v))
            return x + self.down(F.gelu(self.up(self.norm2(x)))), k, v

    class Gpt2Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = torch.nn.LayerNorm(hidden), torch.nn.LayerNorm(hidden)
            self.c_attn, self.c_proj = torch.nn.Linear(hidden, 3 * hidden), torch.nn.Linear(hidden, hidden)
            self.c_fc, self.mlp_proj = torch.nn.Linear(hidden, ffn), torch.nn.Linear(ffn, hidden)

        def forward(self, x, past_k, past_v, pos):
            t = x.shape[0]
            q, k, v = self.c_attn(self.ln_1(x)).split(hidden, dim=1)
            k = torch.cat([past_k, split_heads(k, t, heads)], 1)
            v = torch.cat([past_v, split_heads(v, t, heads)], 1)
            x = x + self.c_proj(attention(split_heads(q, t, heads), k, v))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")), k, v

    class RmsNorm(torch.nn.Module):
        def __init__(self, eps=1e-5):
            super().__init__()
            self.weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
            self.eps = eps

        def forward(self, x):  # as Hugging Face's LlamaRMSNorm
            variance = x.pow(2).mean(-1, keepdim=True)
            return self.weight * (x * torch.rsqrt(variance + self.eps))

    # Rotary tables: angle(p, i) = p * 10000^(-2 (i mod hd/2) / hd), as Llama's rotary embedding.
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.arange(MAX_POSITIONS).float()[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], -1)

    def rotate_half(y):
        return torch.cat([-y[..., head_dim // 2:], y[..., :head_dim // 2]], -1)

    def repeat_kv(y):  # [kv_heads, T, hd] -> [heads, T, hd], KV head j serving heads j*group .. j*group+group-1
        if group == 1:
            return y
        n, T, d = y.shape
        return y[:, None, :, :].expand(n, group, T, d).reshape(n * group, T, d)

    class LlamaLayer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = RmsNorm(), RmsNorm()
            self.q_proj = torch.nn.Linear(hidden, heads * head_dim, bias=False)
            self.k_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.v_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
            self.o_proj = torch.nn.Linear(hidden, hidden, bias=False)
            self.gate_proj, self.up_proj = (torch.nn.Linear(hidden, ffn, bias=False) for _ in range(2))
            self.down_proj = torch.nn.Linear(ffn, hidden, bias=False)
            self.register_buffer("cos_cached", angles.cos(), persistent=False)
            self.register_buffer("sin_cached", angles.sin(), persistent=False)

        def forward(self, x, past_k, past_v, pos):
            t = x.shape[0]
            h = self.input_layernorm(x)
            cos, sin = self.cos_cached[pos:pos + t][None], self.sin_cached[pos:pos + t][None]  # [1, t, hd]
            q = split_heads(self.q_proj(h), t, heads)
            k = split_heads(self.k_proj(h), t, kv_heads)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = torch.cat([past_k, k], 1)
            v = torch.cat([past_v, split_heads(self.v_proj(h), t, kv_heads)], 1)
            x = x + self.o_proj(attention(q, repeat_kv(k), repeat_kv(v)))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h)), k, v

    class Step(torch.nn.Module):
        def __init__(self):
            super().__init__()
            layer = {"tiny": TinyLayer, "gpt2": Gpt2Layer, "llama": LlamaLayer}[kind]
            self.layers = torch.nn.ModuleList([layer() for _ in range(layers)])
            self.norm = torch.nn.LayerNorm(hidden) if kind == "gpt2" else RmsNorm() if kind == "llama" else None
            self.head = torch.nn.Linear(hidden, vocab, bias=kind == "tiny")
            if kind == "gpt2":
                self.wpe = torch.nn.Parameter(0.1 * torch.randn(MAX_POSITIONS, hidden))

        def forward(self, x, *past):
            pos = past[0].shape[1]
            if kind == "gpt2":
                x = x + self.wpe[pos:pos + x.shape[0]]
            present = []
            for i, layer in enumerate(self.layers):
                x, k, v = layer(x, past[2 * i], past[2 * i + 1], pos)
                present += [k, v]
            if self.norm is not None:
                x = self.norm(x)
            return (self.head(x), *present)

    torch.manual_seed(0)
    return Step().eval()


def export(name, outdir):
    import torch
    kind, layers, hidden, heads, kv_heads, ffn, vocab = SHAPES[name]
    head_dim = hidden // heads
    past = [f"past_{kv}{i}" for i in range(layers) for kv in "kv"]
    present = [f"present_{kv}{i}" for i in range(layers) for kv in "kv"]
    example = (torch.randn(1, hidden), *[torch.randn(kv_heads, 5, head_dim) for _ in past])
    dynamic = {n: {1: "past"} for n in past}
    dynamic.update({n: {1: "total"} for n in present})
    path = os.path.join(outdir, name + ".onnx")
    tmp = path + ".tmp"
    with torch.no_grad():
        torch.onnx.export(build(kind, layers, hidden, heads, kv_heads, ffn, vocab), example, tmp,
                          input_names=["x", *past], output_names=["logits", *present], dynamic_axes=dynamic,
                          opset_version=17)
    os.replace(tmp, path)
    print(f"wrote {path}")


def main(argv):
    names = argv[2:] or CI
    if len(argv) < 2 or any(n not in SHAPES for n in names):
        bad = [n for n in names if n not in SHAPES]
        if bad:
            print(f"export_decoder.py: unknown model {bad[0]!r} (one of {', '.join(SHAPES)})", file=sys.stderr)
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    for n in names:
        export(n, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
