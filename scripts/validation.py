#!/usr/bin/env python3
"""Regenerate docs/validation.md: npusim's predictions beside the published figures of real NPUs, their RTL
and vendors' cycle-level models.

Usage: validation.py --npusim NPUSIM [--models DIR] [--jobs N] [--check DOC | --output DOC]

Without --check or --output the document is printed. --check DOC exits 1 with a diff when DOC differs from
what this script prints (the ctest `validation_doc` runs it that way, so the committed document cannot
drift); --output DOC writes it. --only SYSTEM (repeatable) runs that system's rows alone; with --check it
compares that system's section (ctest `validation_gemmini`: the Gemmini sections, seconds, in the unit suite). --models DIR holds the ONNX models (exported there with scripts/export_models.py
when missing). Runs npusim once per distinct configuration (about 40 runs, --jobs at a time).

Every published figure, with its source, is declared once below (PUBLISHED_*); every preset and setting
used is in configs/ or written here next to the row it serves. Errors are (npusim - published) / published;
nothing here is fitted to a row.
"""
import argparse
import concurrent.futures
import difflib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ---------------------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------------------

SOURCES = {
    "onnxim": "PSAL-POSTECH/ONNXim at a1e86296e080fa1c82f8ad3f1b6de1079c192afc, "
              "`tests/operatons/ConvWSTest.cc` and `tests/operatons/GemmWSTest.cc`: each test's `GT`, "
              "Gemmini's RTL cycles for the layer on an 8x8 weight-stationary mesh with magic (zero-latency) "
              "memory, a 64 KiB scratchpad and a 16 KiB accumulator (the convolution tests configure 64+16+16 KiB, "
              "but the tile of each test's mapping string, `[I] ...`, is what `tiled_conv_auto` picks for "
              "64 KiB: 24, 80, 32, 96, 51 and 73 input channels where 96 KiB gives 40, 120, 48, 144, 79, 111)",
    "onnxim-2023": "PSAL-POSTECH/ONNXim at 41783c06 (version 1.0, 2023-05-16; unchanged through c46ae62, "
                   "2024-05-29, and replaced on 2024-08-09 by the figures of the source above), "
                   "`tests/operatons/ConvWSTest.cc` and `tests/operatons/GemmWSTest.cc`: each test's `GT`, Gemmini's "
                   "RTL cycles for ResNet layers and batch-1 FCs on an 8x8 weight-stationary mesh, from an earlier RTL "
                   "run than the source above (the 3x3 56x56 layer: 1,881,975 cycles there against 2,133,641); the "
                   "harness names no Gemmini configuration (it gives its own model 1024 KiB buffers and 4-byte "
                   "elements)",
    "vta": "apache/tvm-vta pull request 30, \"Chisel Pipelined GEMM\" (https://github.com/apache/tvm-vta/pull/30, "
           "2021-06-17): cycles of `deploy_classification.py` under tsim (Verilator simulation of the Chisel "
           "RTL), before (\"Baseline\") and with the pipelined GEMM core; configuration "
           "`config/vta_config.json` and `hardware/chisel/src/main/scala/core/Configs.scala` at "
           "d4a15f627d5cc9762a82270d1be60a136e6af9c2",
    "ethos": "ARM-software/ml-embedded-evaluation-kit, `docs/use_cases/img_class.md` (as mirrored in "
             "alifsemi/alif_ml-embedded-evaluation-kit at 0661d6a25cdcf2f77b2f5b13a08a9ca5cc0b6aeb): the Ethos-U "
             "PMU report of one MobileNetV2 1.0 224 int8 inference on the Corstone-300 FVP with Ethos-U55-128; "
             "Vela's `ethosu/config_files/Arm/vela.ini` (nxp-imx/ethos-u-vela at "
             "1538dce9f07a310587f057aee5fbe25509963879) for the system it was compiled for",
    "tpu": "N. P. Jouppi et al., \"In-Datacenter Performance Analysis of a Tensor Processing Unit\", ISCA 2017: "
           "table 2 (28 W idle, 40 W busy), figure 2 (floorplan: Unified Buffer 29 %, Matrix Multiply Unit 24 %, "
           "Accumulators 6 % of a die under 331 mm2)",
    "eyeriss": "Y.-H. Chen, T. Krishna, J. Emer, V. Sze, \"Eyeriss: An Energy-Efficient Reconfigurable Accelerator "
               "for Deep Convolutional Neural Networks\", IEEE JSSC 52(1), 2017 (ISSCC 2016): the 65 nm chip, 168 PEs "
               "at 200 MHz, runs AlexNet's five convolutional layers at 34.7 frames/s and 278 mW (DRAM not "
               "included), as docs/energy.md cites it",
    "nvdla": "NVDLA Primer, \"Example Area and Performance with NVDLA\" (http://nvdla.org/primer.html; "
             "nvdla/nvdla.github.io `primer.html` at 0fa0e49a9dd3254d1c22c6f1e5b2d7364a9363fe): per configuration "
             "the MACs, convolution buffer, SDRAM bandwidth, cell area at 16 nm, int8 ResNet-50 frames/s and "
             "average power at 1 GHz, from NVIDIA's performance estimator",
}

# ---------------------------------------------------------------------------------------------------------
# Runs: one npusim invocation each, shared by the rows that read it
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    model: str            # what `npusim run` takes; a bare name is MODELS_DIR/NAME.onnx
    config: str           # configs/NAME.yaml
    sets: tuple = ()      # --set KEY=VALUE
    args: tuple = ()      # other options

    def command(self, npusim, models_dir, report):
        model = self.model
        if ":" not in model:
            model = os.path.join(models_dir, model + ".onnx")
        cmd = [npusim, "run", model, "-c", os.path.join(ROOT, "configs", self.config + ".yaml"), "-q",
               "--report", report]
        for s in self.sets:
            cmd += ["--set", s]
        return cmd + list(self.args)

    def describe(self):
        """The options as a user types them (the model named, not its path)."""
        parts = [f"-c {self.config}"] + [f"--set {s}" for s in self.sets] + list(self.args)
        return " ".join(parts)


@dataclass
class Row:
    system: str
    figure: str           # what is compared
    source: str           # a key of SOURCES
    kind: str             # measurement / RTL simulation / vendor model / estimate
    published: float
    unit: str
    run: Run
    predict: object       # function(report) -> float
    assumed: str = ""     # what this row assumes beyond the preset
    setup: str = ""       # the configuration in words


# --- Gemmini: per-layer RTL cycles (ONNXim's tests) --------------------------------------------------------

# An 8x8 Gemmini as ONNXim's tests configure it: ideal memory answering at once (their "magic memory").
GEMMINI_SETS = ("systolic_array.rows=8", "systolic_array.cols=8", "vector.lanes=8",
                "sram.accumulator.size_kib=16", "dram.model=ideal", "dram.latency_ns=0")

# (test name, input height = width, in channels, out channels, kernel, stride, pad, GT cycles): ResNet-18's
# layers as the tests declare them.
PUBLISHED_GEMMINI_CONVS = [
    ("ResNet18_Conv1", 224, 3, 64, 7, 2, 3, 5887961),
    ("ResNet18_layer1_0_Conv1", 56, 64, 64, 3, 1, 1, 2133641),
    ("ResNet18_layer2_0_Conv1", 56, 64, 128, 3, 2, 1, 1052613),
    ("ResNet18_layer2_0_downsample_0", 56, 64, 128, 1, 2, 0, 118304),
    ("ResNet18_layer2_0_Conv2", 28, 128, 128, 3, 1, 1, 2103568),
    ("ResNet18_layer3_0_Conv1", 28, 128, 256, 3, 2, 1, 914287),
    ("ResNet18_layer3_0_Conv2", 14, 256, 256, 3, 1, 1, 1828936),
    ("ResNet18_layer3_0_downsample_0", 28, 128, 256, 1, 2, 0, 101763),
    ("ResNet18_layer4_0_Conv1", 14, 256, 512, 3, 2, 1, 1040621),
    ("ResNet18_layer4_0_downsample_0", 14, 256, 512, 1, 2, 0, 102703),
    ("ResNet18_layer4_0_Conv2", 7, 512, 512, 3, 1, 1, 2051216),
]

# (test name, rows n, reduction c, outputs m, GT cycles): the test computes [n x c] x [c x m].
PUBLISHED_GEMMINI_GEMMS = [
    ("GemmWS1x512x1000Test (ResNet-18 FC)", 1, 512, 1000, 66360),
    ("GemmWS1x2048x1000Test (ResNet-50 FC)", 1, 2048, 1000, 270431),
    ("Bert_512x512x1024", 512, 512, 1024, 4227300),
    ("Bert_512x1024x2", 512, 1024, 2, 67553),
    ("Bert_512x1024x512", 512, 1024, 512, 4228207),
    ("Bert_512x1024x1024", 512, 1024, 1024, 8458619),
    ("Bert_512x1024x3072", 512, 1024, 3072, 25390266),
    ("Bert_512x1024x4096", 512, 1024, 4096, 33912072),
    ("Bert_512x4096x1024", 512, 4096, 1024, 33912533),
    ("GPT_512x512x768", 512, 512, 768, 3171978),
    ("GPT_512x768x512", 512, 768, 512, 3170315),
    ("GPT_512x768x768", 512, 768, 768, 4756894),
    ("GPT_512x768x2304", 512, 768, 2304, 14266861),
]


def matrix_layer_cycles(report):
    """The matrix unit's cycles for the run's one matrix layer (the micro-model's Conv or MatMul): every
    MATMUL/CONV's preload, stream, fill and drain, and the waits between them. ONNXim's tests hold int8
    operands in the scratchpad already; the micro-model's input is fp32, and its conversion to int8 on the
    vector unit (a cost of the micro-model, not of the layer) is left out this way."""
    layers = [l for l in report["layers"] if l["op"] in ("Conv", "MatMul", "Gemm")]
    if len(layers) != 1:
        raise ValueError(f"expected one matrix layer, found {[l['name'] for l in report['layers']]}")
    return layers[0]["compute_cycles"]


# Held out: ONNXim's earlier Gemmini RTL figures. No mechanism, setting or check was made against them (they were
# added after the preset's timing was fixed); they are reported as they fall. The harness's own buffer sizes
# (1024 KiB) are not a Gemmini configuration, so the rows take the preset's, Gemmini's default configuration
# (256 KiB scratchpad, 64 KiB accumulator), on the same 8x8 mesh with ideal memory.
GEMMINI_HOLDOUT_SETS = ("systolic_array.rows=8", "systolic_array.cols=8", "vector.lanes=8", "dram.model=ideal",
                        "dram.latency_ns=0")

# (test name, input height = width, in channels, out channels, kernel, stride, pad, GT cycles). Two tests
# declare a kernel their mapping string and cycles contradict (ResNetConv_26: kernel 1x1 with pad 1 and a 3x3
# mapping, 1,882,561 cycles, the 3x3 layer's count; ResNetConv_27: 3x3 weights with a 1x1 kernel and mapping):
# the mapping's kernel is taken.
PUBLISHED_GEMMINI_HOLDOUT_CONVS = [
    ("ConvWSTestResNetConv_0", 224, 3, 64, 7, 2, 3, 4938719),
    ("ConvWSTestResNetConv_3_8", 56, 64, 64, 3, 1, 1, 1881975),
    ("ConvWSTestResNetConv_13", 56, 64, 128, 3, 2, 1, 1027536),
    ("ConvWSTestResNetConv_16", 56, 64, 128, 1, 2, 0, 101941),
    ("ConvWSTestResNetConv_15_19", 28, 128, 128, 3, 1, 1, 1825897),
    ("ConvWSTestResNetConv_24", 28, 128, 256, 3, 2, 1, 912752),
    ("ConvWSTestResNetConv_26", 14, 256, 256, 3, 1, 1, 1882561),
    ("ConvWSTestResNetConv_27", 28, 128, 256, 1, 2, 0, 101435),
    ("ConvWSTestResNetConv_35", 14, 256, 512, 3, 2, 1, 951837),
    ("ConvWSTestResNetConv_38", 14, 256, 512, 1, 2, 0, 102566),
    ("ConvWSTestResNetLast", 7, 512, 512, 3, 1, 1, 1845838),
]

# (test name, rows n, reduction c, outputs m, GT cycles)
PUBLISHED_GEMMINI_HOLDOUT_GEMMS = [
    ("GemmWS1x512x1000Test", 1, 512, 1000, 65850),
    ("GemmWS1x512x4096Test", 1, 512, 4096, 276956),
    ("GemmWS1x4096x1000Test", 1, 4096, 1000, 540155),
    ("GemmWS1x4096x4096Test", 1, 4096, 4096, 2218131),
]


def gemmini_layer_rows(system, source, convs, gemms, sets, setup, assumed=""):
    """One row per published layer: a conv or gemm micro-model on the gemmini preset with `sets`."""
    rows = []
    for name, hw, c, k, r, stride, pad, gt in convs:
        run = Run(f"conv:H={hw},W={hw},C={c},K={k},R={r},S={r},stride={stride},pad={pad}", "gemmini", sets)
        rows.append(Row(system, f"`{name}`: {r}x{r}/{stride} conv, {c}->{k} ch, {hw}x{hw} input", source,
                        "RTL simulation", gt, "cycles", run, matrix_layer_cycles, assumed=assumed, setup=setup))
    for name, n, c, m, gt in gemms:
        run = Run(f"gemm:M={n},N={m},K={c}", "gemmini", sets)
        rows.append(Row(system, f"`{name}`: [{n}x{c}] x [{c}x{m}]", source, "RTL simulation", gt, "cycles", run,
                        matrix_layer_cycles, assumed=assumed, setup=setup))
    return rows


def gemmini_holdout_rows():
    return gemmini_layer_rows("Gemmini (held out)", "onnxim-2023", PUBLISHED_GEMMINI_HOLDOUT_CONVS,
                              PUBLISHED_GEMMINI_HOLDOUT_GEMMS, GEMMINI_HOLDOUT_SETS,
                              "8x8, the preset's 256 KiB scratchpad and 64 KiB accumulator, ideal memory",
                              "the RTL run's buffers taken as Gemmini's default configuration")


def gemmini_rows():
    return gemmini_layer_rows("Gemmini", "onnxim", PUBLISHED_GEMMINI_CONVS, PUBLISHED_GEMMINI_GEMMS,
                              GEMMINI_SETS + ("sram.input.size_kib=64",),
                              "8x8, 64 KiB scratchpad, 16 KiB accumulator, ideal memory")


# --- VTA under tsim ----------------------------------------------------------------------------------------

# (network in the pull request, torchvision model standing for it, baseline cycles, pipelined GEMM cycles)
PUBLISHED_VTA = [
    ("resnet18_v1", "resnet18", 27679515, 7729601),
    ("resnet34_v1", "resnet34", 57471735, 15736441),
    ("resnet18_v2", "resnet18", 27558980, 7608808),
    ("resnet34_v2", "resnet34", 57270321, 15534528),
    ("resnet50_v2", "resnet50", 68187407, 22012906),
    ("resnet101_v2", "resnet101", 129263035, 39182158),
]


def vta_offloaded_cycles(report):
    """TVM's VTA flow (graph_pack, start at the first max pool, stop at the global average pool) keeps the
    stem conv, the max pool, the pool and the classifier on the CPU: the VTA cycles are those of the
    layers after the first MaxPool and before the GlobalAveragePool, first start to last end."""
    layers = report["layers"]
    ops = [l["op"] for l in layers]
    first = ops.index("MaxPool") + 1
    last = ops.index("GlobalAveragePool")
    # A layer fused into another (placement "fused") has no span of its own.
    span = [l for l in layers[first:last] if l.get("placement") != "fused"]
    return max(l["end_cycle"] for l in span) - min(l["start_cycle"] for l in span)


def vta_rows():
    rows = []
    for net, model, baseline, pipelined in PUBLISHED_VTA:
        run = Run(model, "vta", (), ("--precision", "int8"))
        same = "the same shapes: torchvision's ResNet (stride on the 3x3 conv) stands for Gluon's v1 and v2"
        rows.append(Row("VTA", f"{net}, pipelined GEMM core, VTA cycles", "vta", "RTL simulation", pipelined,
                        "cycles", run, vta_offloaded_cycles, assumed=same,
                        setup="vta preset; the layers between the max pool and the global pool"))
        rows.append(Row("VTA", f"{net}, baseline GEMM core, VTA cycles", "vta", "RTL simulation", baseline,
                        "cycles", run, vta_offloaded_cycles,
                        assumed=same + "; npusim has no form for the baseline core's several cycles per "
                                "micro-op: the prediction is the pipelined preset's",
                        setup="vta preset (pipelined); the layers between the max pool and the global pool"))
    return rows


# --- Ethos-U55-128 on the Corstone-300 FVP -----------------------------------------------------------------

AXI_BEAT_BYTES = 8  # the U55's AXI ports are 64 bits wide (Vela, architecture_features.py: axi_port_width)

PUBLISHED_ETHOS = {
    "active": 7345741, "total": 7346172,
    "axi0_read_beats": 2468259, "axi0_write_beats": 1151319, "axi1_read_beats": 432351,
}


def ethos_rows():
    run = Run("mobilenet_v2", "ethos-u55", (), ("--precision", "int8"))
    p = PUBLISHED_ETHOS
    setup = "ethos-u55 preset (Vela's Ethos_U55_High_End_Embedded, Shared_Sram)"
    model = "torchvision's MobileNetV2 (the architecture of the kit's mobilenet_v2_1.0_224 int8 model)"
    return [
        Row("Ethos-U55-128", "MobileNetV2, NPU TOTAL cycles per inference", "ethos", "vendor model (FVP)",
            p["total"], "cycles", run, lambda r: r["total_cycles"], assumed=model, setup=setup),
        Row("Ethos-U55-128", "MobileNetV2, bytes read (AXI0 + AXI1 read beats x 8 B)", "ethos",
            "vendor model (FVP)", (p["axi0_read_beats"] + p["axi1_read_beats"]) * AXI_BEAT_BYTES, "bytes", run,
            lambda r: r["dram"]["bytes_read"], assumed=model + "; one port carries weights and activations",
            setup=setup),
        Row("Ethos-U55-128", "MobileNetV2, bytes written (AXI0 write beats x 8 B)", "ethos",
            "vendor model (FVP)", p["axi0_write_beats"] * AXI_BEAT_BYTES, "bytes", run,
            lambda r: r["dram"]["bytes_written"], assumed=model, setup=setup),
    ]


# --- TPU v1 ------------------------------------------------------------------------------------------------

PUBLISHED_TPU = {"busy_w": 40.0, "die_mm2": 331.0, "ub_share": 0.29, "mxu_share": 0.24, "acc_share": 0.06}


def tpu_rows():
    run = Run("resnet50", "tpu-v1", (), ("--precision", "int8", "--batch", "8"))
    p = PUBLISHED_TPU
    die = "the die taken as 331 mm2 (the paper: under 331 mm2)"
    setup = "tpu-v1 preset, ResNet-50 int8, batch 8"
    return [
        Row("TPU v1", "busy power (W)", "tpu", "measurement", p["busy_w"], "W", run,
            lambda r: r["energy"]["average_power_w"],
            assumed="the paper's production MLPs, LSTMs and CNNs replaced by ResNet-50", setup=setup),
        Row("TPU v1", "Unified Buffer area (mm2)", "tpu", "measurement (floorplan)", p["ub_share"] * p["die_mm2"],
            "mm2", run, lambda r: r["area"]["by_unit_mm2"]["sram_input"], assumed=die, setup=setup),
        Row("TPU v1", "Matrix Multiply Unit area (mm2)", "tpu", "measurement (floorplan)",
            p["mxu_share"] * p["die_mm2"], "mm2", run, lambda r: r["area"]["by_unit_mm2"]["array"],
            assumed=die, setup=setup),
        Row("TPU v1", "Accumulators area (mm2)", "tpu", "measurement (floorplan)", p["acc_share"] * p["die_mm2"],
            "mm2", run, lambda r: r["area"]["by_unit_mm2"]["sram_accumulator"], assumed=die, setup=setup),
    ]


# --- Eyeriss (AlexNet's convolutional layers) ---------------------------------------------------------------

PUBLISHED_EYERISS = {"fps": 34.7, "mw": 278.0}

# The Eyeriss-like machine of docs/energy.md: 12 x 14 = 168 PEs of 16-bit MACs at 200 MHz, a 112 KiB buffer
# (Eyeriss' global buffer is 108 KB), 65 nm; a 16-bit multiply ~4x Horowitz's 8-bit one plus a 16-bit add.
EYERISS_SETS = ("frequency_mhz=200", "systolic_array.rows=12", "systolic_array.cols=14",
                "systolic_array.fp16_rate=1.0", "sram.input.size_kib=64", "sram.weight.size_kib=32",
                "sram.accumulator.size_kib=16", "vector.lanes=14", "technology.node_nm=65",
                "energy.mac_pj.fp16=0.85")


def conv_layers(report):
    return [l for l in report["layers"] if l["op"] == "Conv"]


def eyeriss_conv_ms(report):
    """Time of AlexNet's Conv layers: their cycles at the clock (the chip's figure covers them alone)."""
    return sum(l["cycles"] for l in conv_layers(report)) / (report["frequency_mhz"] * 1000.0)


def eyeriss_conv_mw(report):
    """Power of the Conv layers without DRAM: their energy (less its dram part) over their time."""
    mj = sum(l["energy"]["total_mj"] - l["energy"]["by_component_mj"]["dram"] for l in conv_layers(report))
    return mj / eyeriss_conv_ms(report) * 1000.0


def eyeriss_rows():
    run = Run("alexnet", "edge", EYERISS_SETS, ("--precision", "fp16"))
    setup = "edge with the Eyeriss-like settings below, fp16, AlexNet's five Conv layers"
    arr = ("a weight-stationary array for Eyeriss' row-stationary one; no per-PE register files; "
           "torchvision's AlexNet (the same conv shapes at 224 x 224)")
    p = PUBLISHED_EYERISS
    return [
        Row("Eyeriss", "AlexNet CONV layers, time per frame (ms)", "eyeriss", "measurement", 1000.0 / p["fps"],
            "ms", run, eyeriss_conv_ms, assumed=arr, setup=setup),
        Row("Eyeriss", "AlexNet CONV layers, power without DRAM (mW)", "eyeriss", "measurement", p["mw"], "mW",
            run, eyeriss_conv_mw, assumed=arr, setup=setup),
    ]


# --- NVDLA primer table (an estimate) ----------------------------------------------------------------------

# (MACs, conv buffer KB, SDRAM GB/s, cell area mm2 at 16 nm, int8 ResNet-50 frames/s, average power mW at 16 nm)
PUBLISHED_NVDLA = [
    (2048, 512, 20, 3.3, 269, 291),
    (1024, 256, 15, 1.8, 153, 143),
    (512, 256, 10, 1.4, 93, 80),
    (256, 256, 5, 1.0, 46, 48),
    (128, 256, 2, 0.84, 20, 31),
    (64, 128, 1, 0.55, 7.3, 21),
    (32, 128, 0.5, 0.51, 3.6, 17),
]

# NVDLA's MAC array is atomic-C (input channels) x atomic-K (output channels); int8 doubles atomic-K of the
# fp16 configurations (nv_full: 64 x 16 fp16 = 64 x 32 int8; nv_small: 8 x 8).
NVDLA_ARRAY = {2048: (64, 32), 1024: (32, 32), 512: (32, 16), 256: (16, 16), 128: (16, 8), 64: (8, 8), 32: (8, 4)}


def nvdla_run(macs, cbuf_kb, gbps):
    rows, cols = NVDLA_ARRAY[macs]
    sets = (f"systolic_array.rows={rows}", f"systolic_array.cols={cols}",
            f"sram.input.size_kib={cbuf_kb // 2}", f"sram.weight.size_kib={cbuf_kb // 2}",
            f"sram.accumulator.size_kib={max(8, cbuf_kb // 4)}", f"vector.lanes={min(16, cols)}",
            "dram.model=simple", "dram.channels=1", f"dram.bandwidth_gbps={gbps}", "dram.latency_ns=100",
            "energy.dram.simple.pj_per_bit=4.0", "technology.node_nm=16")
    return Run("resnet50", "edge", sets, ("--precision", "int8"))


def nvdla_core_power_mw(report):
    """Average power of everything but the DRAM devices (the report's energy without its `dram` part)."""
    e = report["energy"]
    return (e["total_mj"] - e["by_component_mj"]["dram"]) / report["latency_ms"] * 1000.0


def nvdla_rows():
    rows = []
    arr = ("the MACs as atomic-C x atomic-K (an array of rows x cols); the convolution buffer split evenly "
           "between inputs and weights; an accumulator of a quarter of it; edge's other figures")
    for macs, cbuf, gbps, area, fps, mw in PUBLISHED_NVDLA:
        run = nvdla_run(macs, cbuf, gbps)
        setup = f"{macs} MACs, {cbuf} KB buffer, {gbps} GB/s, 1 GHz, 16 nm"
        rows.append(Row("NVDLA", f"{macs} MACs: int8 ResNet-50 frames/s", "nvdla", "estimate", fps, "frames/s",
                        run, lambda r: 1000.0 / r["latency_ms"], assumed=arr, setup=setup))
        rows.append(Row("NVDLA", f"{macs} MACs: cell area at 16 nm (mm2)", "nvdla", "estimate", area, "mm2", run,
                        lambda r: r["area"]["total_mm2"], assumed=arr, setup=setup))
        rows.append(Row("NVDLA", f"{macs} MACs: average power at 16 nm (mW)", "nvdla", "estimate", mw, "mW", run,
                        nvdla_core_power_mw, assumed=arr + "; the primer's power is the NVDLA core's, without the "
                        "DRAM's", setup=setup))
    return rows


def all_rows():
    return gemmini_rows() + gemmini_holdout_rows() + vta_rows() + ethos_rows() + tpu_rows() + eyeriss_rows() + nvdla_rows()


# ---------------------------------------------------------------------------------------------------------
# Running and writing
# ---------------------------------------------------------------------------------------------------------


def ensure_models(models_dir, runs):
    wanted = sorted({r.model for r in runs if ":" not in r.model})
    missing = [m for m in wanted if not os.path.exists(os.path.join(models_dir, m + ".onnx"))]
    if missing:
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "export_models.py"), models_dir]
                       + missing, check=True, stdout=subprocess.DEVNULL)


def simulate(npusim, models_dir, run, tmp):
    fd, report = tempfile.mkstemp(suffix=".json", dir=tmp)
    os.close(fd)
    cmd = run.command(npusim, models_dir, report)
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[:400]}")
    with open(report) as f:
        return json.load(f)


def fmt(value, unit):
    if unit in ("cycles", "bytes"):
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def error(pred, pub):
    return (pred - pub) / pub


def summary_line(rows, preds):
    errs = [abs(error(preds[id(r)], r.published)) for r in rows]
    return (f"{len(rows)} figures, mean |error| {100 * sum(errs) / len(errs):.1f} %, "
            f"largest {100 * max(errs):.1f} %")


INTRO = """# Validation: npusim against published silicon, RTL and vendor models

<!-- Generated by scripts/validation.py; do not edit by hand. The ctest `validation_doc` (label
`validation`) fails when this file differs from what the script prints. -->

Regenerate (from the repository's root, after building; a few minutes on two cores), and check:

    /usr/bin/python3 scripts/validation.py --npusim build/npusim --models /tmp/models --output docs/validation.md
    ctest --test-dir build -L validation

Each row is one published figure of a real NPU, its RTL or its vendor's model, with the system, the
source, the configuration npusim is given, what the row assumes beyond the preset, whether the figure is
a measurement or an estimate, and npusim's prediction with its error, (npusim − published) / published.
Every figure and source is declared once in `scripts/validation.py`; every preset is in `configs/` with
the source of each of its figures. Errors are reported as they fall: no preset figure and no setting is
fitted to a row (DESIGN.md: "When npusim and a published chip disagree, find the mechanism: never fit one
row"). What the errors say, system by system, is below the tables.

A user with measurements of their own board fits a configuration's free parameters to them with
`npusim calibrate` ([calibrate.md](calibrate.md)), which reports the error it leaves on rows it was not
fitted to. This page fits nothing.
"""


def render(rows, preds):
    out = [INTRO, "## Sources\n"]
    for key, text in SOURCES.items():
        out.append(f"- **{key}**: {text}.")
    out.append("\n## Summary\n")
    out.append("| system | kind | figures | mean abs. error | largest abs. error |")
    out.append("|---|---|---|---|---|")
    systems = []
    for r in rows:
        if r.system not in systems:
            systems.append(r.system)
    for s in systems:
        mine = [r for r in rows if r.system == s]
        errs = [abs(error(preds[id(r)], r.published)) for r in mine]
        kinds = ", ".join(sorted({r.kind for r in mine}))
        out.append(f"| {s} | {kinds} | {len(mine)} | {100 * sum(errs) / len(errs):.1f} % | "
                   f"{100 * max(errs):.1f} % |")
    out.append(f"\nAll: {summary_line(rows, preds)}.\n")
    for s in systems:
        mine = [r for r in rows if r.system == s]
        out.append(f"## {s}\n")
        runs = []
        for r in mine:
            if r.run not in runs:
                runs.append(r.run)
        out.append("| figure | source | kind | configuration | assumed | published | npusim | error |")
        out.append("|---|---|---|---|---|---|---|---|")
        for r in mine:
            pred = preds[id(r)]
            out.append(f"| {r.figure} | {r.source} | {r.kind} | {r.setup} | {r.assumed or '-'} | "
                       f"{fmt(r.published, r.unit)} | {fmt(pred, r.unit)} | {100 * error(pred, r.published):+.1f} % |")
        out.append("\nnpusim options (`npusim run MODEL -q --report R.json` plus):\n")
        for run in runs:
            out.append(f"- `{run.model}`: `{run.describe()}`")
        out.append("")
        notes = NOTES.get(s)
        if notes:
            out.append(notes)
    return "\n".join(out).rstrip() + "\n"


NOTES = {}
NOTES_PATH = os.path.join(ROOT, "scripts", "validation_notes.md")


def load_notes():
    """What the errors say, per system: prose kept beside the script (scripts/validation_notes.md, one
    '## SYSTEM' section each) so that the document stays one command's output."""
    if not os.path.exists(NOTES_PATH):
        return
    current, lines = None, []
    with open(NOTES_PATH) as f:
        for line in f:
            if line.startswith("## "):
                if current:
                    NOTES[current] = "".join(lines).strip() + "\n"
                current, lines = line[3:].strip(), []
            elif current:
                lines.append(line)
    if current:
        NOTES[current] = "".join(lines).strip() + "\n"


def section(text, system):
    """The part of a rendered document from its '## SYSTEM' heading to the next heading ("" if none)."""
    start = text.find(f"\n## {system}\n")
    if start < 0:
        return ""
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--npusim", required=True)
    ap.add_argument("--models", default=os.path.join(tempfile.gettempdir(), "npusim-validation-models"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", help="only the rows of this system (repeatable); with --check, "
                                   "only their sections are compared (a quick check; not with --output)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check")
    group.add_argument("--output")
    a = ap.parse_args(argv)
    if not os.access(a.npusim, os.X_OK):
        print(f"validation.py: {a.npusim} is not an executable npusim", file=sys.stderr)
        return 2
    load_notes()
    rows = all_rows()
    if a.only:
        unknown = [s for s in a.only if not any(r.system == s for r in rows)]
        if unknown or a.output:
            print(f"validation.py: --only {', '.join(unknown or a.only)}: no such system, or used with --output",
                  file=sys.stderr)
            return 2
        rows = [r for r in rows if r.system in a.only]
    runs = []
    for r in rows:
        if r.run not in runs:
            runs.append(r.run)
    os.makedirs(a.models, exist_ok=True)
    ensure_models(a.models, runs)
    reports = {}
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        futures = {pool.submit(simulate, a.npusim, a.models, run, tmp): run for run in runs}
        for fut in concurrent.futures.as_completed(futures):
            reports[futures[fut]] = fut.result()
    preds = {id(r): float(r.predict(reports[r.run])) for r in rows}
    text = render(rows, preds)
    if a.check:
        with open(a.check) as f:
            committed = f.read()
        if a.only:
            committed = "".join(section(committed, s) for s in a.only)
            text = "".join(section(text, s) for s in a.only)
        if committed != text:
            sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), text.splitlines(True),
                                                       a.check, "scripts/validation.py"))
            print(f"validation.py: {a.check} differs from what the script prints; regenerate it with --output",
                  file=sys.stderr)
            return 1
        return 0
    if a.output:
        with open(a.output, "w") as f:
            f.write(text)
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
