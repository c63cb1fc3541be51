# all_opcodes.s: a tiny int8 network that uses every npusim opcode.
#
#   image (4x4x2, HWC) -> conv1 3x3 pad 1 (2 -> 4 channels) + bias -> requantize -> relu
#                      -> head: per-pixel classifier 4 -> 2 (a 1x1 conv as a GEMM, weights preloaded)
#                      -> softmax over the 2 classes on the host CPU
# PRELOAD needs a weight-stationary array of at least 4 x 2 PEs.
#
# Token traffic (every push has exactly one pop):
#   load -> matrix : 3 pushes (image, conv1 weights, head weights)  pops: NOP, CONV, PRELOAD
#   load -> vector : 1 push (bias)                                  pop: VEC add
#   matrix -> vector, vector -> matrix, matrix -> store, store -> host: one each
#
# No .machine lines: the program is not tied to one NPU configuration.

.layer conv1 Conv
.layer relu1 Relu
.layer head Conv
.layer softmax Softmax
.hostop softmax Softmax 96            # 16 pixels x 2 classes x (exp, sum, divide)
.tensor input image int8 0x0 1x2x4x4  # ONNX shape (NCHW); stored HWC at DRAM 0x0
.tensor output probs fp32 0x4000 1x2x4x4
# conv1 weights [r*s*in_c = 18 rows x n = 4] int8
.data 0x1000 fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff0103fe0002fdff
# head weights [k = 4 x n = 2] int8
.data 0x1048 fc0403020100fffe
# conv1 bias, 4 x int32: 100, -50, 0, 25
.data 0x1050 64000000ceffffff0000000019000000

# The image with a one-pixel halo of zeros: SRAM box 2 x 6 x 6 at input 0x0.
LOAD layer=conv1 signal=matrix dtype=int8 buf=input dram=0x0 sram=0x0 size0=2 size1=4 size2=4 size3=1 stride1=2 stride2=8 stride3=32 pad_top=1 pad_bottom=1 pad_left=1 pad_right=1 pad_value=0
LOAD layer=conv1 signal=matrix dtype=int8 buf=weight dram=0x1000 sram=0x0 size0=72 size1=1 size2=1 size3=1
LOAD layer=conv1 signal=vector dtype=int32 buf=acc dram=0x1050 sram=0x200 size0=4 size1=1 size2=1 size3=1
LOAD layer=head signal=matrix dtype=int8 buf=weight dram=0x1048 sram=0x100 size0=8 size1=1 size2=1 size3=1

# DMA engines may finish out of order: take the image's token first, then the weights'.
NOP layer=conv1 wait=load
CONV layer=conv1 wait=load signal=vector dtype=int8 a=0x0 b=0x0 c=0x0 in_h=6 in_w=6 in_c=2 out_h=4 out_w=4 n=4 kernel_h=3 kernel_w=3 stride_h=1 stride_w=1 dilation_h=1 dilation_w=1 acc=0 preloaded=0

# 16 pixels x 4 channels of int32: add the bias row, requantize to int8 (multiplier 0x40000000 is
# 0.5 in Q0.31, then >> 2: x / 8), relu.
VEC layer=conv1 wait=matrix|load op=add dtype=int32 dtype_out=int32 src1_buf=acc src1=0x0 src2_buf=acc src2=0x200 dst_buf=acc dst=0x0 d0=4 d1=16 d2=1 bcast=row
vec layer=conv1 op=requantize dtype=int32 dtype_out=int8 src1_buf=acc src1=0x0 dst_buf=input dst=0x100 d0=4 d1=16 d2=1 imm0=0x40000000 imm1=2 imm2=0
VEC layer=relu1 signal=matrix op=relu dtype=int8 dtype_out=int8 src1_buf=input src1=0x100 dst_buf=input dst=0x100 d0=64 d1=1 d2=1

# head: the 4 x 2 weights stay in the array; the 16 pixels (rows of A) stream through.
PRELOAD layer=head wait=load|vector dtype=int8 buf=weight sram=0x100 rows=4 cols=2 row_stride=2
MATMUL layer=head signal=store dtype=int8 a=0x100 a_stride=4 b=0x100 c=0x100 m=16 k=4 n=2 acc=0 preloaded=1
STORE layer=head wait=matrix signal=host dtype=int32 buf=acc dram=0x4000 sram=0x100 size0=32 size1=1 size2=1 size3=1

# Softmax falls back to the CPU: 32 int32 logits over the link, 32 fp32 probabilities back.
HOSTCALL layer=softmax wait=store host_op=0 in_bytes=128 out_bytes=128 cpu_ops=96

BARRIER
HALT
