"""Regenerate ``gpusched_envs/data/catalog.yaml`` from the measured throughput tables.

Developer script: it is the only code that reads the raw traces (the package reads the generated YAML only).

Inputs (paths overridable by flags):
- Gavel's ``simulation_throughputs.json.gz`` (MIT; K80/P100/V100 isolated and space-sharing throughputs);
- Sia/Pollux ``throughput_profiles/<model>/placements-<cluster>.csv`` (no licence: we derive single-GPU step times at
  one batch size and one fitted overlap exponent per model, nothing else is copied);
- PipeDream's per-layer profiles (MIT) for the VGG-16 / ResNet-50 compute ratio;
- Lucid's ``colocate_info.csv.gz`` (S-Lab licence: one derived statistic only).

Every number's source is written next to it in the YAML and in ``gpusched_envs/data/CATALOG_PROVENANCE.md``.

    .venv/bin/python scripts/data/build_catalog.py            # rewrite the bundled catalogue and Gavel copy
    .venv/bin/python scripts/data/build_catalog.py --check    # exit 1 if the bundled catalogue is out of date
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[2]
TRACES = Path("/work/shared/traces")
DATA = REPO / "gpusched_envs" / "data"

GAVEL_COMMIT = "c4fa40097339e9608ab71fd64c8bdea96a5e4a4c"
SIA_COMMIT = "aaf7a0de7b6cb5eab06ea020467ede5d2fd18e70"
PIPEDREAM_COMMIT = "11c40c015e1b7a8e668363c8521609ad48e287f3"
LUCID_COMMIT = "63685a3ab7d15d8e940bb47ef98b6d5cca472b13"
REFERENCE_GPU = "V100"

# ---------------------------------------------------------------------------------------------------------------------
# GPU types. Gavel worker types and Sia profiled clusters map onto them.
# ---------------------------------------------------------------------------------------------------------------------
GPU_TYPES = {
    "K80": (
        12.0,
        "NVIDIA Tesla K80 datasheet: 24 GB per board = 12 GB per GK210 GPU; Gavel worker type 'k80'",
    ),
    "P100": (16.0, "NVIDIA Tesla P100 datasheet (16 GB HBM2); Gavel worker type 'p100'"),
    "V100": (
        16.0,
        "NVIDIA Tesla V100 datasheet (16 GB SXM2, AWS p3); Gavel 'v100'; Sia 'azure' = ND40rs_v2 (V100 32 GB)",
    ),
    "T4": (16.0, "NVIDIA T4 datasheet (16 GB GDDR6); Sia 'aws' = g4dn.12xlarge, 4 x T4 per node"),
    "A100": (40.0, "NVIDIA A100 datasheet (40 GB); Sia 'dgx-ext' = DGX-A100, 8 x A100-40GB NVLink"),
    "RTX2080Ti": (
        11.0,
        "NVIDIA GeForce RTX 2080 Ti spec (11 GB GDDR6); Sia 'rtx' = 8 x RTX 2080 Ti per node",
    ),
    "RTX6000": (
        24.0,
        "NVIDIA Quadro RTX 6000 datasheet (24 GB GDDR6); Sia 'quad' = 4 x Quadro RTX 6000 per node",
    ),
}
GAVEL_WORKER = {"k80": "K80", "p100": "P100", "v100": "V100"}
# Vendor peak FP32 TFLOPS and memory bandwidth (GB/s) per GPU, from the datasheets named in GPU_TYPES (K80: one GK210
# of the board, 8.73 TFLOPS boost and 480 GB/s per board; P100/V100: SXM2; A100: 40 GB SXM). Their ratio to V100
# (geometric mean of the two) is a weak prior on each GPU type's speed factor in fit_speed: it decides a GPU type
# that no model of a family was measured on, and barely moves measured ones.
GPU_SPEC = {
    "K80": (4.37, 240.0),
    "P100": (10.6, 732.0),
    "V100": (15.7, 900.0),
    "T4": (8.1, 320.0),
    "A100": (19.5, 1555.0),
    "RTX2080Ti": (13.4, 616.0),
    "RTX6000": (16.3, 672.0),
}
SPEC_PRIOR_WEIGHT = 1.0  # one cell's worth (log-time units), fixed a priori


def spec_ratio(gpu: str) -> float:
    """Datasheet time ratio to V100: sqrt(FLOPS ratio x memory-bandwidth ratio)."""
    f, b = GPU_SPEC[gpu]
    return math.sqrt(GPU_SPEC[REFERENCE_GPU][0] / f * GPU_SPEC[REFERENCE_GPU][1] / b)


# Sia cluster suffix -> (GPU type, intra-server link, NIC link, GPUs per node). 'dgx-ext' is Sia's default DGX profile
# (simulator_config.py: "extended profiled batch sizes (should be default)"); the no-suffix files are copies of 'aws'.
SIA_CLUSTERS = {
    "aws": ("T4", "pcie3", "eth50", 4),
    "azure": ("V100", "nvlink", "ib100", 8),
    "dgx-ext": ("A100", "nvlink3", "ib200", 8),
    "rtx": ("RTX2080Ti", "pcie3", "eth100", 8),
    "quad": ("RTX6000", "pcie3", "eth100", 4),
}

# ---------------------------------------------------------------------------------------------------------------------
# Links: vendor nominal unidirectional rate; the usable fraction and per-hop latency of each link family are fitted on
# the Sia/Pollux step times (fit_network), because a framework's all-reduce reaches far less than the line rate.
# ---------------------------------------------------------------------------------------------------------------------
INITIAL_EFFICIENCY = 0.8  # starting point of the fit: NCCL's bus bandwidth on large messages (nccl-tests)
LINKS = {
    # name: (nominal GB/s per direction, source)
    "nvlink": (150.0, "NVLink 2.0 on V100 SXM2: 6 links x 25 GB/s per direction (NVIDIA V100 whitepaper)"),
    "nvlink3": (
        300.0,
        "NVLink 3.0 / NVSwitch on A100: 12 links x 25 GB/s per direction (NVIDIA A100 whitepaper)",
    ),
    "pcie3": (15.75, "PCIe 3.0 x16: 8 GT/s x 16 lanes x 128b/130b = 15.75 GB/s per direction (PCI-SIG)"),
    "pcie4": (31.5, "PCIe 4.0 x16: 16 GT/s x 16 lanes x 128b/130b = 31.5 GB/s per direction (PCI-SIG)"),
    "eth10": (1.25, "10 GbE (IEEE 802.3ae): 10 Gb/s = 1.25 GB/s"),
    "eth25": (3.125, "25 GbE (IEEE 802.3by): 25 Gb/s = 3.125 GB/s"),
    "eth40": (5.0, "40 GbE (IEEE 802.3ba): 40 Gb/s = 5 GB/s"),
    "eth50": (6.25, "50 Gb/s: AWS g4dn.12xlarge 'up to 50 Gbps' network (AWS EC2 G4 instance page)"),
    "eth100": (12.5, "100 GbE (IEEE 802.3ba/bm): 100 Gb/s = 12.5 GB/s"),
    "ib100": (12.5, "InfiniBand EDR 4x: 100 Gb/s = 12.5 GB/s (Azure ND40rs_v2 has EDR IB)"),
    "ib200": (25.0, "InfiniBand HDR 4x: 200 Gb/s = 25 GB/s (one DGX-A100 compute rail)"),
}

# ---------------------------------------------------------------------------------------------------------------------
# Models. params: parameter count (gradient bytes = 4 x params, fp32 gradients) with its source.
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelDef:
    name: str
    display_name: str
    origin: str  # "gavel", "sia" or "derived"
    key: str  # Gavel model name / Sia directory
    batch_size: int  # per-GPU batch the times refer to
    params: float
    params_source: str
    analogue: str | None = None  # Sia model whose fitted overlap exponent this model reuses


MODELS = [
    ModelDef(
        "resnet18",
        "ResNet-18 (CIFAR-10)",
        "gavel",
        "ResNet-18",
        128,
        11_173_962,
        "ResNet-18 for CIFAR-10 (kuangliu/pytorch-cifar, used by Gavel): 11,173,962 parameters",
        "cifar10",
    ),
    ModelDef(
        "resnet50",
        "ResNet-50 (ImageNet)",
        "gavel",
        "ResNet-50",
        64,
        25_557_032,
        "ResNet-50 (He et al., CVPR'16; torchvision): 25,557,032 parameters",
        "imagenet",
    ),
    ModelDef(
        "vgg16",
        "VGG-16 (ImageNet)",
        "derived",
        "vgg16",
        128,
        138_357_544,
        "VGG-16 (Simonyan & Zisserman, ICLR'15; torchvision): 138,357,544 parameters",
        "imagenet",
    ),
    ModelDef(
        "transformer",
        "Transformer (Multi30k)",
        "gavel",
        "Transformer",
        64,
        65_000_000,
        "Transformer base (Vaswani et al., NeurIPS'17, Table 3): 65 M parameters (Gavel's Multi30k vocabulary is "
        "smaller, so this is an upper estimate)",
        "bert",
    ),
    ModelDef(
        "lm",
        "LSTM language model (Wikitext-2)",
        "gavel",
        "LM",
        20,
        13_977_678,
        "PyTorch word_language_model defaults (2-layer LSTM, emsize = nhid = 200, Wikitext-2 vocabulary 33,278): "
        "13,977,678 parameters (computed)",
    ),
    ModelDef(
        "recommendation",
        "Autoencoder recommender (ML-20M)",
        "gavel",
        "Recommendation",
        1024,
        8_063_508,
        "Gavel's recoder DynamicAutoencoder(hidden_layers=[200]) on ML-20M with 20,108 items (Liang et al. "
        "WWW'18 preprocessing): 2 x 20,108 x 200 + 200 + 20,108 = 8,063,508 parameters (computed)",
    ),
    ModelDef(
        "a3c",
        "A3C (Atari Pong)",
        "gavel",
        "A3C",
        1,
        589_319,
        "ikostrikov/pytorch-a3c ActorCritic (4 conv 32x3x3, LSTMCell(288, 256), 6 actions): 589,319 parameters "
        "(computed). Gavel gives no batch size; one iteration = one A3C update",
    ),
    ModelDef(
        "cyclegan",
        "CycleGAN (monet2photo)",
        "gavel",
        "CycleGAN",
        1,
        28_286_338,
        "CycleGAN (Zhu et al., ICCV'17; junyanz/pytorch-CycleGAN-and-pix2pix): 2 ResNet-9 generators x 11,378,179 "
        "+ 2 PatchGAN discriminators x 2,764,737 = 28,286,338 parameters",
    ),
    ModelDef(
        "cifar10",
        "ResNet-18 (CIFAR-10, Sia/Pollux)",
        "sia",
        "cifar10",
        129,
        11_173_962,
        "ResNet-18 for CIFAR-10 (kuangliu/pytorch-cifar, adaptdl example): 11,173,962 parameters",
    ),
    ModelDef(
        "imagenet",
        "ResNet-50 (ImageNet, Sia/Pollux)",
        "sia",
        "imagenet",
        163,
        25_557_032,
        "ResNet-50 (He et al., CVPR'16; torchvision): 25,557,032 parameters",
    ),
    ModelDef(
        "bert",
        "BERT-base fine-tuning (SQuAD)",
        "sia",
        "bert",
        11,
        110_000_000,
        "BERT-base (Devlin et al., NAACL'19): 110 M parameters",
    ),
    ModelDef(
        "deepspeech2",
        "DeepSpeech2",
        "sia",
        "deepspeech2",
        20,
        86_600_000,
        "DeepSpeech2 as in deepspeech.pytorch (2 conv + 5 bidirectional LSTM x 1024 hidden): ~86.6 M parameters "
        "(computed estimate; the Pollux artifact does not state the width)",
    ),
    ModelDef(
        "yolov3",
        "YOLOv3 (PASCAL VOC)",
        "sia",
        "yolov3",
        8,
        61_500_000,
        "YOLOv3 (Redmon & Farhadi, 2018): 61.9 M parameters with 80 COCO classes, ~61.5 M with 20 VOC classes",
    ),
    ModelDef(
        "ncf",
        "NeuMF (MovieLens-1M)",
        "sia",
        "ncf",
        257,
        1_602_657,
        "NeuMF-end (He et al., WWW'17) as in adaptdl examples/NCF (factor 32, 3 MLP layers, ml-1m: 6,040 users, "
        "3,706 items): 1,602,657 parameters (computed)",
    ),
]
# Pollux initial batch sizes (smallest validation-<bsz>.csv): the Sia batch is the common measured local_bsz nearest it.
SIA_INITIAL_BATCH = {"cifar10": 128, "imagenet": 200, "bert": 12, "deepspeech2": 20, "yolov3": 8, "ncf": 256}
DEFAULT_GAMMA_NOTE = (
    "the one exponent shared by every model, fitted with the links on the Sia/Pollux placements (stage 1)"
)


# ---------------------------------------------------------------------------------------------------------------------
# The throughput formula, shared with scripts/data/fidelity.py.
# ---------------------------------------------------------------------------------------------------------------------
def ring_all_reduce_time(gradient_bytes, n_gpus, bandwidth, latency):
    """Ring all-reduce of ``gradient_bytes`` over ``n_gpus``: 2(n-1)/n * S / B + 2(n-1) steps x per-hop latency."""
    n = np.asarray(n_gpus, dtype=float)
    steps = 2.0 * (n - 1.0)
    return np.where(n > 1, steps / np.maximum(n, 1.0) * gradient_bytes / bandwidth + steps * latency, 0.0)


def combine(compute, communication, gamma):
    """Pollux's overlap model: (c^g + m^g)^(1/g); g = 1 is no overlap, large g tends to max(c, m)."""
    c, m = np.asarray(compute, dtype=float), np.asarray(communication, dtype=float)
    return (c**gamma + m**gamma) ** (1.0 / gamma)


def parse_placement(p) -> tuple[int, ...]:
    """Sia placement code -> GPUs per node, e.g. 44 -> (4, 4), 1234 -> (1, 2, 3, 4)."""
    return tuple(int(ch) for ch in str(int(p)))


def sia_placements(sia_dir: Path, model: str, cluster: str) -> pd.DataFrame:
    """One Sia placements file with derived columns: num_nodes, num_gpus, step_time (total; includes sync_time)."""
    df = pd.read_csv(sia_dir / model / f"placements-{cluster}.csv")
    nodes = df.placement.map(parse_placement)
    df = df.assign(num_nodes=nodes.map(len), num_gpus=nodes.map(sum))
    return df[["placement", "num_nodes", "num_gpus", "local_bsz", "step_time", "sync_time"]]


def sia_batch_size(sia_dir: Path, model: str) -> int:
    common = None
    for cluster in SIA_CLUSTERS:
        df = sia_placements(sia_dir, model, cluster)
        sizes = set(df.local_bsz[df.placement == 1].astype(int))
        common = sizes if common is None else common & sizes
    target = SIA_INITIAL_BATCH[model]
    return min(sorted(common), key=lambda b: (abs(b - target), b))


# ---------------------------------------------------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------------------------------------------------
def gavel_key(model: str, batch: int) -> str:
    if model in ("A3C", "CycleGAN"):
        return f"('{model}', 1)"
    return f"('{model} (batch size {batch})', 1)"


def load_gavel(gavel_dir: Path) -> dict:
    with gzip.open(gavel_dir / "simulation_throughputs.json.gz", "rt") as f:
        return json.load(f)


def measured_times(args, gavel: dict) -> tuple[dict, dict, dict]:
    """(model -> {gpu: seconds}), (model -> {gpu: source text}), Sia batch sizes; measured cells only."""
    times: dict[str, dict[str, float]] = {}
    notes: dict[str, dict[str, str]] = {}
    batches: dict[str, int] = {}
    for m in MODELS:
        times[m.name], notes[m.name] = {}, {}
        if m.origin == "gavel":
            key = gavel_key(m.key, m.batch_size)
            for worker, gpu in GAVEL_WORKER.items():
                tput = gavel[worker][key]["null"]
                times[m.name][gpu] = 1.0 / tput
                notes[m.name][gpu] = f"gavel {worker} {key}: 1 / {tput:.6g} steps/s"
        elif m.origin == "sia":
            bsz = sia_batch_size(args.sia_dir, m.key)
            batches[m.name] = bsz
            for cluster, (gpu, *_rest) in SIA_CLUSTERS.items():
                df = sia_placements(args.sia_dir, m.key, cluster)
                row = df[(df.placement == 1) & (df.local_bsz == bsz)]
                times[m.name][gpu] = float(row.step_time.iloc[0])
                notes[m.name][gpu] = (
                    f"sia {m.key}/placements-{cluster}.csv placement 1, local_bsz {bsz}: step_time"
                )
            # Reject a V100 (azure) time slower than the T4 one: a V100 has ~2x the T4's FP32/FP16 throughput and
            # ~3x its memory bandwidth, so such a row measures host-side overhead of the Azure VM, not the GPU.
            if times[m.name]["V100"] > times[m.name]["T4"]:
                notes[m.name]["V100"] = (
                    f"rejected azure measurement {times[m.name]['V100']:.4g} s (slower than T4 "
                    f"{times[m.name]['T4']:.4g} s: host overhead); derived instead"
                )
                del times[m.name]["V100"]
    return times, notes, batches


# Architecture families (what the measured cells support: every family has cells on both the Gavel GPUs K80/P100/V100
# and the Sia GPUs T4/A100/RTX, except 'rl' whose only model, A3C, was profiled by Gavel alone).
FAMILY = {
    "resnet18": "cnn",
    "resnet50": "cnn",
    "vgg16": "cnn",
    "cyclegan": "cnn",
    "cifar10": "cnn",
    "imagenet": "cnn",
    "yolov3": "cnn",
    "transformer": "transformer",
    "bert": "transformer",
    "lm": "rnn",
    "deepspeech2": "rnn",
    "recommendation": "recommendation",
    "ncf": "recommendation",
    "a3c": "rl",
}
# Entries of one architecture are tied: they share the GPU-ratio deviations of their architecture (ARCH), and entries
# at the same per-GPU batch on the same data set also share the model effect (SAME_MODEL_EFFECT: Gavel's ResNet-18
# batch 128 and Sia's cifar10 ResNet-18 batch 129 are the same network on the same data).
ARCH = {"resnet18": "resnet18", "cifar10": "resnet18", "resnet50": "resnet50", "imagenet": "resnet50"}
SAME_MODEL_EFFECT = {"cifar10": "resnet18"}
# Ridge penalties (log-time units) on the family deviations and the architecture deviations from the GPU factors: a
# family deviation is cheaper than an architecture one, so a GPU ratio shared by a family lands in the family term.
# Fixed a priori (not tuned on the validation below).
RIDGE_FAMILY = 0.1
RIDGE_ARCH = 0.3
GENERATIONS = (("P100", "K80"), ("V100", "P100"), ("A100", "V100"))  # (newer, older), NVIDIA data-centre line


def fit_speed(
    times: dict, ridge_family: float = RIDGE_FAMILY, families: bool = True, spec_prior: bool = True
):
    """Fit log t(m, g) = a_m + s_g + d_(family(m), g) + e_(arch(m), g) on the measured cells ``times[m][g]``.

    s_g: one factor per GPU type (s_V100 = 0); d: per-architecture-family deviations, ridge-shrunk towards 0 so that
    a family with no cell on a GPU type falls back to the all-model factor; e: deviations shared by the entries of one
    architecture (ARCH). ``families=False`` drops d and e (the earlier one-factor-per-GPU rule, for comparison);
    ``spec_prior`` pulls each s_g weakly towards the datasheet ratio (:func:`spec_ratio`).
    Returns predict(model, gpu) -> seconds and the fitted terms."""
    gpus = list(GPU_TYPES)
    models = [m for m in times if times[m]]
    effect = {m: SAME_MODEL_EFFECT.get(m, m) for m in models}
    effects = sorted(set(effect.values()))
    fams = sorted({FAMILY[m] for m in models}) if families else []
    archs = sorted({ARCH[m] for m in models if m in ARCH}) if families else []
    col: dict = {}
    for e in effects:
        col[("a", e)] = len(col)
    for g in gpus:
        col[("s", g)] = len(col)
    for f in fams:
        for g in gpus:
            col[("d", f, g)] = len(col)
    for r in archs:
        for g in gpus:
            col[("e", r, g)] = len(col)
    rows, ys = [], []
    for m in models:
        for g, t in times[m].items():
            x = np.zeros(len(col))
            x[col[("a", effect[m])]] = 1.0
            x[col[("s", g)]] = 1.0
            if families:
                x[col[("d", FAMILY[m], g)]] = 1.0
                if m in ARCH:
                    x[col[("e", ARCH[m], g)]] = 1.0
            rows.append(x)
            ys.append(math.log(t))
    # s_V100 = 0 and every deviation is 0 on V100 (the reference), pinned hard; ridge rows for the deviations
    for key, j in col.items():
        x = np.zeros(len(col))
        if key[0] == "s" and key[1] == REFERENCE_GPU or key[0] in ("d", "e") and key[-1] == REFERENCE_GPU:
            x[j] = 1e3
        elif key[0] == "d":
            x[j] = math.sqrt(ridge_family)
        elif key[0] == "e":
            x[j] = math.sqrt(RIDGE_ARCH)
        elif key[0] == "s" and spec_prior:
            x[j] = math.sqrt(SPEC_PRIOR_WEIGHT)
            rows.append(x)
            ys.append(math.sqrt(SPEC_PRIOR_WEIGHT) * math.log(spec_ratio(key[1])))
            continue
        else:
            continue
        rows.append(x)
        ys.append(0.0)
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)

    def predict(m: str, g: str) -> float:
        if ("a", SAME_MODEL_EFFECT.get(m, m)) not in col:
            raise KeyError(f"no measured cell anchors {m}")
        v = coef[col[("a", SAME_MODEL_EFFECT.get(m, m))]] + coef[col[("s", g)]]
        if families:
            v += coef[col[("d", FAMILY[m], g)]]
            if m in ARCH and ("e", ARCH[m], g) in col:
                v += coef[col[("e", ARCH[m], g)]]
        return math.exp(v)

    terms = {
        "gpu": {g: float(coef[col[("s", g)]]) for g in gpus},
        "family": {f: {g: float(coef[col[("d", f, g)]]) for g in gpus} for f in fams},
    }
    return predict, terms


def leave_one_cell_out(times: dict, **kw) -> pd.DataFrame:
    """Each measured single-GPU cell re-derived from all the others (refit without it): held-out error per cell."""
    out = []
    for m in times:
        for g, t in times[m].items():
            rest = {k: {h: v for h, v in times[k].items() if (k, h) != (m, g)} for k in times}
            predict, _ = fit_speed({k: v for k, v in rest.items() if v}, **kw)
            try:
                pred = predict(m, g)
            except KeyError:  # nothing left anchors this model's effect
                continue
            out.append({"model": m, "gpu": g, "measured": t, "derived": pred, "ape": abs(pred - t) / t * 100})
    return pd.DataFrame(out)


SIA_ONLY_GPUS = ("T4", "A100", "RTX2080Ti", "RTX6000")  # each measured on one Sia cluster only


def fit_roofline(times: dict):
    """Alternative derivation, NOT shipped (compared in ``--validate``): a roofline-style regression on the GPU
    datasheets, log t(m, g) = a_m + w1_f log(FLOPS_V100 / FLOPS_g) + w2_f log(BW_V100 / BW_g), the two sensitivities
    per architecture family f fitted on the measured cells (GPU_SPEC). Returns predict(model, gpu) -> seconds."""
    models = [m for m in times if times[m]]
    effect = {m: SAME_MODEL_EFFECT.get(m, m) for m in models}
    effects = sorted(set(effect.values()))
    fams = sorted({FAMILY[m] for m in models})
    col = {("a", e): i for i, e in enumerate(effects)}
    for f in fams:
        col[("w", f, 0)], col[("w", f, 1)] = len(col), len(col) + 1

    def features(g: str) -> tuple[float, float]:
        (f, b), (f0, b0) = GPU_SPEC[g], GPU_SPEC[REFERENCE_GPU]
        return math.log(f0 / f), math.log(b0 / b)

    x_rows, ys = [], []
    for m in models:
        for g, t in times[m].items():
            x = np.zeros(len(col))
            x[col[("a", effect[m])]] = 1.0
            x[col[("w", FAMILY[m], 0)]], x[col[("w", FAMILY[m], 1)]] = features(g)
            x_rows.append(x)
            ys.append(math.log(t))
    coef, *_ = np.linalg.lstsq(np.array(x_rows), np.array(ys), rcond=None)

    def predict(m: str, g: str) -> float:
        if ("a", SAME_MODEL_EFFECT.get(m, m)) not in col:
            raise KeyError(f"no measured cell anchors {m}")
        f1, f2 = features(g)
        w1, w2 = coef[col[("w", FAMILY[m], 0)]], coef[col[("w", FAMILY[m], 1)]]
        return math.exp(coef[col[("a", SAME_MODEL_EFFECT.get(m, m))]] + w1 * f1 + w2 * f2)

    return predict


def leave_one_gpu_type_out(times: dict, fit=None) -> pd.DataFrame:
    """Each Sia-only GPU type's measured cells re-derived with all of that type's cells removed (what
    leave-one-cluster-out needs: a new GPU type known by its datasheet only). ``fit``: times -> predict."""
    fit = fit or (lambda t: fit_speed(t)[0])
    out = []
    for gpu in SIA_ONLY_GPUS:
        rest = {m: {g: t for g, t in v.items() if g != gpu} for m, v in times.items()}
        predict = fit({m: v for m, v in rest.items() if v})
        for m, v in times.items():
            if gpu in v:
                out.append({"model": m, "gpu": gpu, "ape": abs(predict(m, gpu) - v[gpu]) / v[gpu] * 100})
    return pd.DataFrame(out)


def oracle_gpu_factor(times: dict) -> pd.DataFrame:
    """A lower bound for any rule that gives every model the same time ratio to V100 on a GPU type: that ratio
    chosen with hindsight (the median of the held cells' own log ratios), over the Sia-only GPU types' cells of the
    models with a measured V100 cell."""
    out = []
    for gpu in SIA_ONLY_GPUS:
        logs = {
            m: math.log(v[gpu] / v[REFERENCE_GPU])
            for m, v in times.items()
            if gpu in v and REFERENCE_GPU in v
        }
        if not logs:
            continue
        best = float(np.median(list(logs.values())))
        out += [{"model": m, "gpu": gpu, "ape": abs(math.exp(x - best) - 1) * 100} for m, x in logs.items()]
    return pd.DataFrame(out)


def fill_derived(times: dict, notes: dict, vgg_ratio: float, gavel: dict) -> dict:
    """Complete the (model x GPU) table with :func:`fit_speed` (family factors, tied architectures).

    A missing cell is the fitted model effect x the GPU factor x the family's (and the architecture's) deviation."""
    gpus = list(GPU_TYPES)
    models = [m for m in times if times[m]]
    predict, terms = fit_speed(times)
    for m in models:
        fam = FAMILY[m]
        for g in gpus:
            if g not in times[m]:
                times[m][g] = predict(m, g)
                ratio = predict(m, g) / predict(m, REFERENCE_GPU)
                prev = notes[m].get(g, "")
                tie = f", tied to {ARCH[m]} architecture cells" if m in ARCH else ""
                notes[m][g] = (prev + "; " if prev else "") + (
                    f"derived: fitted model effect x GPU factor x '{fam}' family deviation{tie}: "
                    f"{ratio:.3f} x its V100 time"
                )
    speed = terms["gpu"]
    # Generations of the data-centre line: a derived cell never makes the newer GPU slower than the older one (a
    # pair of measured cells is kept as measured, e.g. recommendation on V100 vs P100). A violating derived older cell
    # is raised to the newer one's time, else a derived newer cell is lowered to the older one's.
    for m in models:
        for _ in range(2 * len(GENERATIONS)):
            changed = False
            for new, old in GENERATIONS:
                t_new, t_old = times[m][new], times[m][old]
                if t_new <= t_old * (1 + 1e-9):
                    continue
                measured_new = not notes[m][new].startswith(("derived", "rejected"))
                measured_old = not notes[m][old].startswith(("derived", "rejected"))
                if not measured_old:
                    times[m][old] = t_new
                    notes[m][old] += f"; raised to the {new} time (a {new} is not slower than a {old})"
                    changed = True
                elif not measured_new:
                    times[m][new] = t_old
                    notes[m][new] += f"; lowered to the {old} time (a {new} is not slower than a {old})"
                    changed = True
            if not changed:
                break
    # VGG-16: ResNet-50 (batch size 128, Gavel) on each GPU x the PipeDream VGG-16/ResNet-50 compute ratio at batch 128.
    times["vgg16"] = {}
    notes["vgg16"] = {}
    r50 = {gpu: 1.0 / gavel[w][gavel_key("ResNet-50", 128)]["null"] for w, gpu in GAVEL_WORKER.items()}
    for g in gpus:
        base = r50.get(
            g,
            times["resnet50"][g]
            * (1.0 / gavel["v100"][gavel_key("ResNet-50", 128)]["null"])
            / times["resnet50"]["V100"],
        )
        times["vgg16"][g] = base * vgg_ratio
        src = "gavel ResNet-50 (batch size 128)" if g in r50 else "derived ResNet-50 (batch size 128)"
        notes["vgg16"][g] = f"derived: {src} time x PipeDream VGG-16/ResNet-50 compute ratio {vgg_ratio:.3f}"
    return speed


def pipedream_vgg_ratio(pipedream_dir: Path) -> float:
    df = pd.read_csv(pipedream_dir / "pipedream_models.csv").set_index("model")
    fb = df.sum_forward_ms_excl_input + df.sum_backward_ms_excl_input
    assert df.loc["vgg16", "implied_batch_size"] == df.loc["resnet50", "implied_batch_size"] == 128
    return float(fb["vgg16"] / fb["resnet50"])


LINK_FAMILY = {
    "nvlink": "nvlink",
    "nvlink3": "nvlink",
    "pcie3": "pcie",
    "pcie4": "pcie",
    "eth10": "ethernet",
    "eth25": "ethernet",
    "eth40": "ethernet",
    "eth50": "ethernet",
    "eth100": "ethernet",
    "ib100": "infiniband",
    "ib200": "infiniband",
}
FAMILIES = ("nvlink", "pcie", "ethernet", "infiniband")
# The Azure ND40rs_v2 (V100) profiles are left out of the link/overlap fit (they are still scored by fidelity.py):
# the VM adds host-side overhead (its 1-GPU cifar10 and ncf steps are slower than on a T4), and a 2-GPU all-reduce
# inside one VM is slower than across two VMs over InfiniBand (imagenet at local_bsz 163: placement "2" = 1.53 x the
# 1-GPU step, "11" = 0.95 x), so NCCL evidently used neither NVLink peer-to-peer nor the IB fabric at full rate.
# NVLink and InfiniBand are therefore fitted on the DGX-A100 rows only.
EXCLUDED_FROM_LINK_FIT = {"azure"}


def sia_rows(args, times: dict, notes: dict, batches: dict) -> pd.DataFrame:
    """Multi-GPU Sia placement rows at the catalogue batch, on GPU types whose single-GPU time is measured."""
    frames = []
    for m in MODELS:
        if m.origin != "sia":
            continue
        for cluster, (gpu, intra, nic, _n) in SIA_CLUSTERS.items():
            if notes[m.name][gpu].startswith(("derived", "rejected")):
                continue
            df = sia_placements(args.sia_dir, m.key, cluster)
            df = df[(df.local_bsz == batches[m.name]) & (df.num_gpus > 1)].copy()
            if cluster in EXCLUDED_FROM_LINK_FIT:
                continue
            link = np.where(df.num_nodes > 1, nic, intra)
            df = df.assign(
                model=m.name,
                cluster=cluster,
                compute=times[m.name][gpu],
                gradient_bytes=m.params * 4.0,
                nominal=[LINKS[x][0] * 1e9 for x in link],
                family=[FAMILIES.index(LINK_FAMILY[x]) for x in link],
                # across servers the ring also crosses the intra-server link (throughput.py): the slower one bounds it
                nominal_intra=LINKS[intra][0] * 1e9,
                family_intra=FAMILIES.index(LINK_FAMILY[intra]),
            )
            frames.append(df)
    return pd.concat(frames, ignore_index=True)


# ---------------------------------------------------------------------------------------------------------------------
# The Azure ND40rs_v2 VM as a catalogue server type. Its profiles do not follow the DGX links: inside the
# VM a 2..8-GPU all-reduce grows about linearly with the GPUs on the VM (bert at local_bsz 11: +0.05 s on 2 GPUs,
# +0.66 s on 8), the signature of NCCL staging GPU-to-GPU traffic through host memory (no NVLink peer-to-peer inside
# the VM), where the k GPUs of a job on the VM share one path; and its cifar10 / ncf single-GPU steps are slower than
# on a T4 (host-side input work per sample). Modelled as a server type, not a change to V100 or NVLink:
#   intra link 'nd40rs-host': shared_by_gpus (k GPUs on the VM get bandwidth / k), usable bandwidth + per-hop latency
#   host_s_per_sample: seconds per training sample added to the V100 time of the models whose V100 cell was not
#   measured on this VM (the measured cells already contain it); NIC: the catalogue's ib100 (EDR InfiniBand).
# Split: fitted on the placements-azure rows (1-2 VMs); the scalability-azure rows (3-5 VMs) are held out.
# ---------------------------------------------------------------------------------------------------------------------
AZURE_TYPE = "ND40rs_v2"
AZURE_LINK = "nd40rs-host"


def azure_rows(
    sia_dir: Path, times: dict, notes: dict, batches: dict, gammas: dict, source: str
) -> pd.DataFrame:
    """Azure rows of ``source`` ('placements' or 'scalability') at the catalogue batch with what the fit needs."""
    frames = []
    for m in MODELS:
        if m.origin != "sia":
            continue
        if source == "placements":
            df = sia_placements(sia_dir, m.key, "azure")
            k = df.placement.map(lambda p: max(parse_placement(p)))
        else:
            pl = sia_placements(sia_dir, m.key, "azure")
            df = pd.read_csv(sia_dir / m.key / "scalability-azure.csv")
            df = df.assign(num_gpus=df.num_replicas, placement=-1)
            keys = set(zip(pl.num_nodes, pl.num_gpus, pl.local_bsz, strict=True))
            df = df[[k not in keys for k in zip(df.num_nodes, df.num_gpus, df.local_bsz, strict=True)]]
            k = -(
                -df.num_gpus // df.num_nodes
            )  # even spread over the VMs: the fullest VM holds ceil(n / nodes)
        df = df.assign(k=k)
        df = df[df.local_bsz == batches[m.name]]
        measured_here = not notes[m.name]["V100"].startswith(("derived", "rejected"))
        frames.append(
            df.assign(
                model=m.name,
                compute=times[m.name]["V100"],
                measured_here=measured_here,
                batch=batches[m.name],
                gradient_bytes=m.params * 4.0,
                gamma=gammas[m.name],
            )[
                [
                    "model",
                    "num_nodes",
                    "num_gpus",
                    "k",
                    "step_time",
                    "compute",
                    "measured_here",
                    "batch",
                    "gradient_bytes",
                    "gamma",
                ]
            ]
        )
    return pd.concat(frames, ignore_index=True)


def predict_azure(
    rows: pd.DataFrame, host_bw: float, host_lat: float, host_s: float, nic_bw: float, nic_lat: float
):
    """throughput.py's rule on an ND40rs_v2 VM: compute + host overhead, shared intra path, NIC across VMs."""
    c = rows.compute.to_numpy() + np.where(rows.measured_here.to_numpy(), 0.0, host_s * rows.batch.to_numpy())
    intra = host_bw / rows.k.to_numpy()
    multi = rows.num_nodes.to_numpy() > 1
    bandwidth = np.where(multi, np.minimum(intra, nic_bw), intra)
    latency = np.where(multi, max(host_lat, nic_lat), host_lat)
    comm = ring_all_reduce_time(rows.gradient_bytes.to_numpy(), rows.num_gpus.to_numpy(), bandwidth, latency)
    return combine(c, comm, rows.gamma.to_numpy())


def fit_azure(rows: pd.DataFrame, nic_bw: float, nic_lat: float) -> dict:
    """Fit the VM's shared host-path bandwidth, its per-hop latency and the host seconds per sample on ``rows``
    (mean |log(pred / step_time)|, bounded Powell as fit_network)."""
    import scipy.optimize

    def unpack(x):
        return math.exp(x[0]), math.exp(x[1]), math.exp(x[2])

    def loss(x):
        pred = predict_azure(rows, *unpack(x), nic_bw, nic_lat)
        return float(np.mean(np.abs(np.log(pred / rows.step_time.to_numpy()))))

    bounds = [
        (math.log(1e8), math.log(1e11)),
        (math.log(1e-6), math.log(2e-2)),
        (math.log(1e-7), math.log(1e-2)),
    ]
    best = None
    for x0 in (
        [math.log(5e9), math.log(1e-4), math.log(4e-4)],
        [math.log(1e9), math.log(1e-3), math.log(1e-4)],
    ):
        res = scipy.optimize.minimize(
            loss, x0, method="Powell", bounds=bounds, options={"xtol": 1e-4, "ftol": 1e-8, "maxfev": 20000}
        )
        if best is None or res.fun < best.fun:
            best = res
    bw, lat, host = unpack(best.x)
    return {
        "bandwidth": bw,
        "latency": lat,
        "host_s_per_sample": host,
        "mean_abs_log_error": float(best.fun),
        "rows": len(rows),
    }


def _predict_fit(
    rows: pd.DataFrame, eff: np.ndarray, lat: np.ndarray, gamma: np.ndarray, model_idx: np.ndarray
):
    fam, intra = rows.family.to_numpy(), rows.family_intra.to_numpy()
    bandwidth = rows.nominal.to_numpy() * eff[fam]
    latency = lat[fam]
    multi = rows.num_nodes.to_numpy() > 1
    bandwidth = np.where(multi, np.minimum(bandwidth, rows.nominal_intra.to_numpy() * eff[intra]), bandwidth)
    latency = np.where(multi, np.maximum(latency, lat[intra]), latency)
    comm = ring_all_reduce_time(rows.gradient_bytes.to_numpy(), rows.num_gpus.to_numpy(), bandwidth, latency)
    return combine(rows.compute.to_numpy(), comm, gamma[model_idx])


def fit_network(rows: pd.DataFrame, models: list[str], fixed_gamma: dict | None = None) -> dict:
    """Fit the usable fraction and per-hop latency of each link family and the overlap exponent of each model.

    Objective: mean |log(predicted / measured step_time)| over the rows (Powell, bounded). A model in
    ``fixed_gamma`` keeps that exponent (used for leave-one-model-out validation).
    """
    import scipy.optimize

    fixed_gamma = fixed_gamma or {}
    free = [m for m in models if m not in fixed_gamma]
    model_idx = rows.model.map({m: i for i, m in enumerate(models)}).to_numpy()
    nf = len(FAMILIES)
    present = set(rows.family.unique())

    def unpack(theta):
        eff = np.exp(theta[:nf])
        lat = np.exp(theta[nf : 2 * nf])
        gamma = np.array([fixed_gamma.get(m, 1.0) for m in models], dtype=float)
        for j, m in enumerate(free):
            gamma[models.index(m)] = theta[2 * nf + j]
        return eff, lat, gamma

    def loss(theta):
        eff, lat, gamma = unpack(theta)
        pred = _predict_fit(rows, eff, lat, gamma, model_idx)
        return float(np.mean(np.abs(np.log(pred / rows.step_time.to_numpy()))))

    x0 = np.concatenate(
        [np.full(nf, math.log(INITIAL_EFFICIENCY)), np.full(nf, math.log(2e-5)), np.full(len(free), 1.5)]
    )
    bounds = (
        [(math.log(0.005), 0.0)] * nf + [(math.log(1e-6), math.log(2e-2))] * nf + [(1.0, 10.0)] * len(free)
    )
    best = None
    for start in (x0, np.concatenate([x0[:nf] - 2.0, x0[nf : 2 * nf] + 2.0, x0[2 * nf :] + 1.0])):
        res = scipy.optimize.minimize(
            loss, start, method="Powell", bounds=bounds, options={"xtol": 1e-4, "ftol": 1e-7, "maxfev": 40000}
        )
        if best is None or res.fun < best.fun:
            best = res
    eff, lat, gamma = unpack(best.x)
    return {
        "efficiency": {f: float(eff[i]) for i, f in enumerate(FAMILIES) if i in present},
        "latency": {f: float(lat[i]) for i, f in enumerate(FAMILIES) if i in present},
        "gamma": {m: float(gamma[i]) for i, m in enumerate(models)},
        "mean_abs_log_error": float(best.fun),
        "rows": len(rows),
        "rows_per_family": {
            FAMILIES[int(k)]: int(v) for k, v in rows.family.value_counts().sort_index().items()
        },
    }


def link_arrays(fit: dict) -> tuple[np.ndarray, np.ndarray]:
    """(usable fraction, per-hop latency) per link family (FAMILIES order) of a network fit. A family no fitted row
    used (NVLink and InfiniBand when the DGX rows are held out) keeps the fit's starting point: NCCL's large-message
    bus bandwidth fraction INITIAL_EFFICIENCY and 20 µs per hop. (Tried instead: the median of the fitted families;
    on the DGX held out it made the network part worse, 9.1 % -> 22.3 % median with measured 1-GPU times, since
    NVLink/InfiniBand latencies are far below the PCIe/Ethernet ones.)"""
    eff = np.array([fit["efficiency"].get(f, INITIAL_EFFICIENCY) for f in FAMILIES])
    lat = np.array([fit["latency"].get(f, 2e-5) for f in FAMILIES])
    return eff, lat


def fit_model_gamma(rows: pd.DataFrame, eff: np.ndarray, lat: np.ndarray) -> float:
    """One model's overlap exponent on its rows with the link parameters fixed (mean |log error|, bounded 1-10)."""
    import scipy.optimize

    measured = rows.step_time.to_numpy()
    idx = np.zeros(len(rows), dtype=int)

    def loss(g: float) -> float:
        pred = _predict_fit(rows, eff, lat, np.array([g]), idx)
        return float(np.mean(np.abs(np.log(pred / measured))))

    res = scipy.optimize.minimize_scalar(loss, bounds=(1.0, 10.0), method="bounded", options={"xatol": 1e-4})
    return float(res.x)


def fit_network_two_stage(rows: pd.DataFrame, models: list[str]) -> dict:
    """The shipped link/overlap fit (chosen on held-out accuracy), in two stages:

    1. the usable fraction and per-hop latency of each link family together with ONE overlap exponent shared by
       every model (:func:`fit_network` on the rows pooled as one model);
    2. each profiled model's own exponent on its rows, the links fixed (:func:`fit_model_gamma`).

    A model without a profile gets the stage-1 shared exponent, with the same links. Fitted jointly with per-model
    exponents (the earlier rule), the link parameters trade off against the exponents (refitted without one model,
    the NVLink usable fraction ranged 0.014-0.37): the links identified with a model-agnostic exponent are the ones
    that transfer to an unseen model (leave-one-model-out, scripts/data/fidelity.py --heldout)."""
    shared = fit_network(rows.assign(model="all"), ["all"])
    eff, lat = link_arrays(shared)
    gamma = {m: fit_model_gamma(rows[rows.model == m], eff, lat) for m in models}
    idx = rows.model.map({m: i for i, m in enumerate(models)}).to_numpy()
    pred = _predict_fit(rows, eff, lat, np.array([gamma[m] for m in models]), idx)
    return {
        **shared,
        "gamma": gamma,
        "shared_gamma": shared["gamma"]["all"],
        "mean_abs_log_error": float(np.mean(np.abs(np.log(pred / rows.step_time.to_numpy())))),
        "shared_mean_abs_log_error": shared["mean_abs_log_error"],
    }


def leave_one_model_out(rows: pd.DataFrame, models: list[str]) -> dict[str, float]:
    """Out-of-sample check: fit on five models (two stages), predict the sixth with their shared exponent."""
    out = {}
    for held in models:
        others = [m for m in models if m != held]
        fit = fit_network_two_stage(rows[rows.model != held], others)
        eff, lat = link_arrays(fit)
        test = rows[rows.model == held]
        gamma = np.array([fit["shared_gamma"]])
        pred = _predict_fit(test, eff, lat, gamma, np.zeros(len(test), dtype=int))
        ape = np.abs(pred - test.step_time.to_numpy()) / test.step_time.to_numpy() * 100
        out[held] = float(np.median(ape))
    return out


SHARE_FLOOR = 0.05


def gpu_sharing(gavel: dict) -> tuple[list[dict], float, int, dict[str, float]]:
    """Space-sharing fractions measured by Gavel on each of its GPU types: tput_self / isolated tput_self.

    Returns the entries (untyped ones on the reference GPU, for GPU types without measurements, plus one typed
    entry per measured GPU type), the reference GPU's median over every entry, its count, and that median per type."""
    ours = {gavel_key(m.key, m.batch_size): m.name for m in MODELS if m.origin == "gavel"}
    pairs = []
    medians: dict[str, float] = {}
    ref_median, ref_count = 1.0, 0
    for worker, gpu in GAVEL_WORKER.items():
        table = gavel[worker]
        for key, name in ours.items():
            iso = table[key]["null"]
            for other_key, other in ours.items():
                if other_key not in table[key]:
                    continue
                # Gavel records 0 where the pair does not fit one GPU's memory (ResNet-50 with ResNet-50 or
                # CycleGAN on a K80): floored at SHARE_FLOOR so a job placed there crawls instead of never finishing
                fraction = round(max(min(table[key][other_key][0] / iso, 1.0), SHARE_FLOOR), 4)
                if gpu == REFERENCE_GPU:
                    pairs.append({"model": name, "other": other, "fraction": fraction})
                pairs.append({"model": name, "other": other, "gpu_type": gpu, "fraction": fraction})
        every = []
        for key, entry in table.items():
            if not key.endswith(", 1)"):
                continue
            for other_key, val in entry.items():
                if other_key != "null" and isinstance(val, list) and entry["null"] > 0:
                    every.append(min(val[0] / entry["null"], 1.0))
        medians[gpu] = float(np.median(every))
        if gpu == REFERENCE_GPU:
            ref_median, ref_count = medians[gpu], len(every)
    return pairs, ref_median, ref_count, medians


def server_slowdown(lucid_dir: Path) -> tuple[float, int]:
    """Host-side interference proxy from Lucid: pairs whose combined GPU utilisation < 50 % (GPU not the bottleneck)."""
    df = pd.read_csv(lucid_dir / "colocate_info.csv.gz")
    light = df[df.gpu_util < 50]
    speeds = np.concatenate([light.speed1.to_numpy(), light.speed2.to_numpy()])
    return float(1.0 / speeds.mean()), len(light)


def mix_weights(sia_dir: Path, gavel: dict) -> tuple[dict[str, float], dict[str, str]]:
    """Half the mix follows Gavel's job table (job types per model), half Sia's Philly workloads (jobs per app)."""
    v100 = gavel["v100"]
    gavel_counts = {}
    for m in MODELS:
        if m.origin == "gavel":
            prefix = f"('{m.key}"
            gavel_counts[m.name] = sum(
                1
                for k in v100
                if k.endswith(", 1)") and (k.startswith(prefix + " (") or k.startswith(prefix + "'"))
            )
    apps = pd.concat(pd.read_csv(p) for p in sorted((sia_dir.parent / "workloads" / "philly").glob("*.csv")))
    sia_counts = apps.application.value_counts().to_dict()
    g_total, s_total = sum(gavel_counts.values()), sum(sia_counts.values())
    weights, notes = {}, {}
    for m in MODELS:
        if m.name in gavel_counts:
            weights[m.name] = round(0.5 * gavel_counts[m.name] / g_total, 4)
            notes[m.name] = f"0.5 x {gavel_counts[m.name]}/{g_total} Gavel job types (scale factor 1)"
        elif m.origin == "sia":
            c = int(sia_counts.get(m.key, 0))
            weights[m.name] = round(0.5 * c / s_total, 4)
            notes[m.name] = f"0.5 x {c}/{s_total} jobs in Sia's Philly workloads 1-8"
        else:
            weights[m.name] = 0.0
            notes[m.name] = "0: no trace draws this model"
    return weights, notes


def sig(x: float, digits: int = 5) -> float:
    return float(f"{x:.{digits}g}")


def build(args) -> tuple[dict, dict]:
    gavel = load_gavel(args.gavel_dir)
    times, notes, batches = measured_times(args, gavel)
    vgg_ratio = pipedream_vgg_ratio(args.pipedream_dir)
    speed = fill_derived(times, notes, vgg_ratio, gavel)
    rows = sia_rows(args, times, notes, batches)
    sia_models = [m.name for m in MODELS if m.origin == "sia"]
    fit = fit_network_two_stage(rows, sia_models)
    lomo = leave_one_model_out(rows, sia_models) if args.validate else {}
    gammas = fit["gamma"]
    default_gamma = fit["shared_gamma"]
    sharing, share_default, share_n, share_by_type = gpu_sharing(gavel)
    slowdown, slow_n = server_slowdown(args.lucid_dir)
    weights, weight_notes = mix_weights(args.sia_dir, gavel)
    ib = (LINKS["ib100"][0] * 1e9 * fit["efficiency"]["infiniband"], fit["latency"]["infiniband"])
    az_rows = azure_rows(args.sia_dir, times, notes, batches, gammas, "placements")
    azure = fit_azure(az_rows, *ib)

    doc: dict = {"reference_gpu": REFERENCE_GPU, "gpu_types": {}, "links": {}, "models": {}}
    for g, (mem, src) in GPU_TYPES.items():
        doc["gpu_types"][g] = {"memory_gb": mem, "source": src}
    for name, (nominal, src) in LINKS.items():
        family = LINK_FAMILY[name]
        eff, lat = fit["efficiency"][family], fit["latency"][family]
        doc["links"][name] = {
            "bandwidth_gbytes_per_s": sig(nominal * eff, 4),
            "latency_s": sig(lat, 3),
            "nominal_gbytes_per_s": nominal,
            "usable_fraction": sig(eff, 4),
            "source": (
                f"nominal: {src}. Usable fraction and per-hop latency of the '{family}' family fitted on "
                f"{fit['rows_per_family'][family]} Sia/Pollux multi-GPU step times (PyTorch DDP/adaptdl, NCCL) with one "
                f"overlap exponent shared by every model"
            ),
        }
    doc["links"][AZURE_LINK] = {
        "bandwidth_gbytes_per_s": sig(azure["bandwidth"] / 1e9, 4),
        "latency_s": sig(azure["latency"], 3),
        "shared_by_gpus": True,
        "source": (
            f"Azure ND40rs_v2 (8 x V100) GPU-to-GPU path inside the VM: NCCL stages the traffic through host memory "
            f"(no NVLink peer-to-peer in the VM), so the k GPUs of a job on the VM share it. Bandwidth and per-hop "
            f"latency fitted with the server type's host overhead on the {azure['rows']} Sia/Pollux "
            f"placements-azure.csv rows at the catalogue batch (1-2 VMs; the scalability-azure rows, 3-5 VMs, are "
            f"held out); mean |log error| {azure['mean_abs_log_error']:.3f}"
        ),
    }
    order = [
        "resnet18",
        "resnet50",
        "vgg16",
        "transformer",
        "lm",
        "recommendation",
        "a3c",
        "cyclegan",
        "cifar10",
        "imagenet",
        "bert",
        "deepspeech2",
        "yolov3",
        "ncf",
    ]
    by_name = {m.name: m for m in MODELS}
    for name in order:
        m = by_name[name]
        if name in gammas:
            gamma = gammas[name]
            n_rows = int((rows.model == name).sum())
            gamma_src = (
                f"fitted on its {n_rows} Sia/Pollux multi-GPU placements at local_bsz {batches[name]} with the "
                f"link parameters fixed (those fitted with one exponent shared by every model, "
                f"{fit['shared_gamma']:.4g})"
            )
        elif m.analogue:
            gamma = gammas[m.analogue]
            gamma_src = (
                f"taken from {m.analogue} (fitted; same or closest architecture profiled by Sia/Pollux)"
            )
        else:
            gamma = default_gamma
            gamma_src = f"default: {DEFAULT_GAMMA_NOTE}"
        measured = sorted(g for g in GPU_TYPES if not notes[name][g].startswith(("derived", "rejected")))
        doc["models"][name] = {
            "display_name": m.display_name,
            "batch_size": int(batches.get(name, m.batch_size)),
            "gradient_bytes": float(m.params * 4),
            "overlap_gamma": sig(gamma, 4),
            "mix_weight": weights[name],
            "iteration_time_s": {g: sig(times[name][g]) for g in GPU_TYPES},
            "sources": {
                "measured_on": measured,
                "iteration_time": {g: notes[name][g] for g in GPU_TYPES},
                "gradient_bytes": f"4 bytes x parameters; {m.params_source}",
                "overlap_gamma": gamma_src,
                "mix_weight": weight_notes[name],
            },
        }
    measured_az = sorted(
        m.name
        for m in MODELS
        if m.origin == "sia" and not notes[m.name]["V100"].startswith(("derived", "rejected"))
    )
    doc["server_types"] = {
        AZURE_TYPE: {
            "gpu_type": "V100",
            "gpus": 8,
            "intra_link": AZURE_LINK,
            "nic": "ib100",
            "host_s_per_sample": sig(azure["host_s_per_sample"], 4),
            "measured_models": measured_az,
            "source": (
                "Azure ND40rs_v2 VM (8 x V100 32 GB, NVLink, EDR InfiniBand; Sia's 'azure' profiles). "
                "host_s_per_sample: host-side seconds per training sample added to the V100 time of every model "
                "whose V100 time was not measured on this VM (measured_models already include it), fitted jointly "
                f"with the {AZURE_LINK} link on the placements-azure rows; nic: ib100 as fitted on the DGX rows"
            ),
        }
    }
    doc["interference"] = {
        "default_server_slowdown": sig(slowdown, 4),
        "default_server_slowdown_source": (
            f"1 / mean normalised speed of the {slow_n} Lucid co-located pairs whose combined GPU utilisation < 50% "
            f"(host-side contention only; derived statistic, Lucid @ {LUCID_COMMIT[:10]})"
        ),
        "pairs": [],
        "default_gpu_share_fraction": sig(share_default, 4),
        "default_gpu_share_fraction_source": (
            f"median tput_self / isolated over all {share_n} Gavel v100 space-sharing entries at scale factor 1"
        ),
        "default_gpu_share_fraction_by_type": {g: sig(v, 4) for g, v in share_by_type.items()},
        "default_gpu_share_fraction_by_type_source": (
            "the same median over every Gavel space-sharing entry measured on that GPU type (k80, p100, v100)"
        ),
        "gpu_sharing": sharing,
        "gpu_sharing_source": (
            "Gavel space-sharing entries at the catalogue batch sizes: tput_self / isolated, measured on K80, P100 "
            "and V100 (entries with gpu_type); untyped entries (the V100 ones) serve the GPU types Gavel did not "
            "measure (T4, A100, RTX)"
        ),
    }
    info = {
        "fit": fit,
        "azure": azure,
        "lomo": lomo,
        "speed": speed,
        "vgg_ratio": vgg_ratio,
        "batches": batches,
    }
    return doc, info


HEADER = """\
# GENERATED by scripts/data/build_catalog.py — do not edit by hand; see CATALOG_PROVENANCE.md for schema and sources.
# Regenerate: .venv/bin/python scripts/data/build_catalog.py
# Gavel @ {gavel}, Sia artifacts @ {sia}, PipeDream @ {pd}, Lucid @ {lucid}
"""


def render(doc: dict) -> str:
    head = HEADER.format(
        gavel=GAVEL_COMMIT[:10], sia=SIA_COMMIT[:10], pd=PIPEDREAM_COMMIT[:10], lucid=LUCID_COMMIT[:10]
    )
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=200)


def bundle_gavel(gavel_dir: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(gavel_dir / "simulation_throughputs.json.gz", dest / "simulation_throughputs.json.gz")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gavel-dir", type=Path, default=TRACES / "gavel")
    p.add_argument("--sia-dir", type=Path, default=TRACES / "sia_pollux" / "throughput_profiles")
    p.add_argument("--pipedream-dir", type=Path, default=TRACES / "alibaba_v2018_dag" / "dl_dag")
    p.add_argument("--lucid-dir", type=Path, default=TRACES / "helios" / "lucid_profiles")
    p.add_argument("--out", type=Path, default=DATA / "catalog.yaml")
    p.add_argument(
        "--no-bundle", action="store_true", help="do not refresh data/gavel/simulation_throughputs.json.gz"
    )
    p.add_argument("--check", action="store_true", help="only compare with --out; exit 1 when it differs")
    p.add_argument("--validate", action="store_true", help="also run the leave-one-model-out check (slower)")
    args = p.parse_args(argv)
    doc, info = build(args)
    text = render(doc)
    if args.check:
        same = args.out.exists() and args.out.read_text() == text
        print("catalogue up to date" if same else f"{args.out} differs from a fresh build")
        return 0 if same else 1
    args.out.write_text(text)
    if not args.no_bundle:
        bundle_gavel(args.gavel_dir, DATA / "gavel")
    print(f"wrote {args.out}")
    print("Sia batch sizes:", info["batches"])
    fit = info["fit"]
    print(f"network fit on {fit['rows']} rows, mean |log error| {fit['mean_abs_log_error']:.4f}")
    print("  usable fraction:", {k: round(v, 4) for k, v in fit["efficiency"].items()})
    print("  per-hop latency [s]:", {k: float(f"{v:.3g}") for k, v in fit["latency"].items()})
    print(f"  shared overlap gamma (stage 1): {fit['shared_gamma']:.4g}")
    print("  per-model overlap gamma (stage 2):", {k: round(v, 3) for k, v in fit["gamma"].items()})
    az = info["azure"]
    print(
        f"{AZURE_TYPE} server type on {az['rows']} placements-azure rows: shared host path "
        f"{az['bandwidth'] / 1e9:.3g} GB/s, latency {az['latency']:.3g} s, host {az['host_s_per_sample'] * 1e3:.3g} "
        f"ms/sample, mean |log error| {az['mean_abs_log_error']:.3f}"
    )
    if info["lomo"]:
        print("leave-one-model-out median APE [%]:", {k: round(v, 1) for k, v in info["lomo"].items()})
    if args.validate:
        # each measured single-GPU cell re-derived from the others (rejected Azure cells excluded)
        measured, _notes, _b = measured_times(args, load_gavel(args.gavel_dir))
        measured = {m: v for m, v in measured.items() if v}
        for label, kw in (
            ("one factor per GPU type", {"families": False, "spec_prior": False}),
            ("family factors + ties", {"spec_prior": False}),
            ("family factors + ties + datasheet prior", {}),
        ):
            cells = leave_one_cell_out(measured, **kw)
            print(
                f"leave-one-cell-out, {label}: {len(cells)} cells, median {cells.ape.median():.1f}%, "
                f"p90 {np.percentile(cells.ape, 90):.1f}%"
            )
        for label, fit in (("shipped rule", None), ("roofline alternative (not shipped)", fit_roofline)):
            cells = leave_one_gpu_type_out(measured, fit)
            per = ", ".join(f"{g} {p.ape.median():.1f}" for g, p in cells.groupby("gpu", sort=False))
            print(
                f"leave-one-GPU-type-out (T4, A100, RTX2080Ti, RTX6000), {label}: {len(cells)} cells, median "
                f"{cells.ape.median():.1f}%, p90 {np.percentile(cells.ape, 90):.1f}% ({per})"
            )
        cells = oracle_gpu_factor(measured)
        print(
            f"  lower bound, one ratio to V100 per GPU type chosen with hindsight on the held cells: {len(cells)} "
            f"cells, median {cells.ape.median():.1f}%, p90 {np.percentile(cells.ape, 90):.1f}%"
        )
    print("GPU factors vs V100:", {g: round(math.exp(s), 3) for g, s in info["speed"].items()})
    print(f"PipeDream VGG-16 / ResNet-50 compute ratio: {info['vgg_ratio']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
