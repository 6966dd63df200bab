"""Compare the simulator's predicted iteration times with the measured Sia/Pollux step times.

For every Sia/Pollux model x profiled GPU cluster x placement (``placements-<cluster>.csv``; ``--scalability`` adds the
``scalability-<cluster>.csv`` rows) at the catalogue's batch size, predict the iteration time from the bundled catalogue
(single-GPU time of the GPU type, gradient bytes, links, overlap exponent) and report the absolute percentage error
against the measured ``step_time``. In Pollux/adaptdl ``step_time`` is the whole optimiser step and already contains
``sync_time`` (the exposed all-reduce wait): Pollux's simulator uses ``step_time`` as the iteration time and
``step_time - sync_time`` as the compute part, so the measured total is ``step_time``.

    .venv/bin/python scripts/data/fidelity.py [--out results/fidelity.txt] [--scalability] [--csv rows.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_catalog import AZURE_TYPE, SIA_CLUSTERS, TRACES, parse_placement, sia_placements  # noqa: E402

from gpusched_envs.sim.catalog import Catalog, default_catalog, load_catalog  # noqa: E402

SIA_MODELS = ("cifar10", "imagenet", "bert", "deepspeech2", "yolov3", "ncf")
USE_REFERENCE = False  # --reference: use the standalone formula even when the package's predictor exists


# ---------------------------------------------------------------------------------------------------------------------
# Prediction. Uses the package's public function when it exists; otherwise the reference formula below.
# ---------------------------------------------------------------------------------------------------------------------
def reference_predict_iteration_time(
    compute_s: float,
    gradient_bytes: float,
    n_gpus: np.ndarray,
    bandwidth: np.ndarray,
    latency: np.ndarray,
    gamma: float,
) -> np.ndarray:
    """The throughput model, standalone: ring all-reduce 2(n-1)/n * S / B + 2(n-1) x per-hop latency over the
    bottleneck link (intra-server link on one server, the NIC across servers), combined with the compute time as
    (c^g + m^g)^(1/g). Kept here so the check runs before/without ``gpusched_envs.sim.throughput``."""
    n = np.asarray(n_gpus, dtype=float)
    steps = 2.0 * (n - 1.0)
    comm = np.where(n > 1, steps / np.maximum(n, 1.0) * gradient_bytes / bandwidth + steps * latency, 0.0)
    return (compute_s**gamma + comm**gamma) ** (1.0 / gamma)


def _package_predictor():
    try:
        from gpusched_envs.sim.throughput import predict_iteration_time
        from gpusched_envs.sim.topology import build_cluster
    except ImportError:
        return None
    return predict_iteration_time, build_cluster


def _testbed(build_cluster, catalog: Catalog, cluster: str, num_servers: int):
    """A one-rack copy of a Sia testbed: ``num_servers`` servers of the cluster's GPU type, intra link and NIC."""
    gpu, intra, nic, per_node = SIA_CLUSTERS[cluster]
    server = {"count": num_servers, "gpus": per_node, "gpu_type": gpu, "intra_link": intra, "nic": nic}
    if cluster == "azure" and AZURE_TYPE in catalog.server_types:  # the VM's own server type (host overhead)
        server = {"count": num_servers, "server_type": AZURE_TYPE}
    doc = {"name": f"sia-{cluster}", "racks": [{"count": 1, "servers": [server]}]}
    return build_cluster(doc, catalog, where=f"sia-{cluster}")


def _gpu_ids(placement: tuple[int, ...], per_node: int) -> list[int]:
    return [server * per_node + k for server, count in enumerate(placement) for k in range(count)]


def predict(catalog: Catalog, model: str, cluster: str, rows: pd.DataFrame) -> tuple[np.ndarray, str]:
    """Predicted seconds per iteration for Sia rows of one (model, cluster)."""
    gpu, intra, nic, per_node = SIA_CLUSTERS[cluster]
    package = None if USE_REFERENCE else _package_predictor()
    if package is not None:
        predict_iteration_time, build_cluster = package
        shapes = [_row_placement(r, per_node) for r in rows.itertuples()]
        testbed = _testbed(build_cluster, catalog, cluster, max(len(p) for p in shapes))
        out = [predict_iteration_time(testbed, model, _gpu_ids(p, per_node)).total for p in shapes]
        return np.array(out), "gpusched_envs.sim.throughput.predict_iteration_time"
    mi, gi = catalog.model_index(model), catalog.gpu_index(gpu)
    multi = rows.num_nodes.to_numpy() > 1
    link_intra, link_nic = catalog.link(intra), catalog.link(nic)
    out = reference_predict_iteration_time(
        float(catalog.iteration_time[mi, gi]),
        float(catalog.gradient_bytes[mi]),
        rows.num_gpus.to_numpy(),
        np.where(multi, link_nic.bandwidth, link_intra.bandwidth),
        np.where(multi, link_nic.latency, link_intra.latency),
        float(catalog.overlap_gamma[mi]),
    )
    return out, "scripts/data/fidelity.py reference_predict_iteration_time"


def _row_placement(row, per_node: int) -> tuple[int, ...]:
    """GPUs per server of a row: the placement code, or for scalability rows an even spread over num_nodes."""
    if row.placement > 0:
        return parse_placement(row.placement)
    base, extra = divmod(int(row.num_gpus), int(row.num_nodes))
    shape = tuple(base + (1 if i < extra else 0) for i in range(int(row.num_nodes)))
    if max(shape) > per_node:
        raise ValueError(f"{row.num_gpus} GPUs do not fit {row.num_nodes} servers of {per_node}")
    return shape


def scalability_rows(sia_dir: Path, model: str, cluster: str) -> pd.DataFrame:
    """Scalability rows: num_nodes x num_replicas (GPUs spread evenly over the nodes when predicting)."""
    df = pd.read_csv(sia_dir / model / f"scalability-{cluster}.csv")
    df = df.assign(num_gpus=df.num_replicas, placement=-1)
    return df[["placement", "num_nodes", "num_gpus", "local_bsz", "step_time", "sync_time"]]


def collect(catalog: Catalog, sia_dir: Path, scalability: bool) -> tuple[pd.DataFrame, set[str]]:
    frames, used = [], set()
    for model in SIA_MODELS:
        if model not in catalog.model_names:
            continue
        batch = _catalog_batch(model)
        for cluster, (gpu, *_rest) in SIA_CLUSTERS.items():
            df = sia_placements(sia_dir, model, cluster).assign(source="placements")
            if scalability:
                sc = scalability_rows(sia_dir, model, cluster).assign(source="scalability")
                keys = set(zip(df.num_nodes, df.num_gpus, df.local_bsz, strict=True))
                sc = sc[[k not in keys for k in zip(sc.num_nodes, sc.num_gpus, sc.local_bsz, strict=True)]]
                df = pd.concat([df, sc], ignore_index=True)
            df = df[df.local_bsz == batch].copy()
            if df.empty:
                continue
            pred, how = predict(catalog, model, cluster, df)
            used.add(how)
            df["model"], df["cluster"], df["gpu"] = model, cluster, gpu
            df["predicted"] = pred
            df["ape"] = np.abs(pred - df.step_time.to_numpy()) / df.step_time.to_numpy() * 100.0
            df["kind"] = np.where(
                df.num_gpus == 1, "1 GPU", np.where(df.num_nodes == 1, "1 server", "multi-server")
            )
            df["derived_compute"] = _is_derived(model, gpu)
            frames.append(df)
    return pd.concat(frames, ignore_index=True), used


_DOC: dict = {}


def _doc() -> dict:
    """The catalogue YAML as a dict (for batch sizes and which cells are measured)."""
    return _DOC


def _load_doc(path: Path | None) -> None:
    from importlib import resources

    import yaml

    text = (
        path.read_text()
        if path
        else resources.files("gpusched_envs").joinpath("data/catalog.yaml").read_text()
    )
    _DOC.clear()
    _DOC.update(yaml.safe_load(text))


def _catalog_batch(model: str) -> int:
    return int(_doc()["models"][model]["batch_size"])


def _is_derived(model: str, gpu: str) -> bool:
    return gpu not in _doc()["models"][model]["sources"].get("measured_on", [])


def summarize(df: pd.DataFrame, by: str | list[str]) -> pd.DataFrame:
    agg = {
        "rows": ("ape", "size"),
        "median_ape": ("ape", "median"),
        "p90_ape": ("ape", lambda x: np.percentile(x, 90)),
    }
    return df.groupby(by).agg(**agg).round(1)


def report(df: pd.DataFrame, used: set[str]) -> str:
    lines = ["Simulator fidelity vs Sia/Pollux measured step_time (APE = |pred - meas| / meas, %)"]
    lines.append(f"predictor: {', '.join(sorted(used))}")
    lines.append("measured total = step_time (Pollux/adaptdl: step_time includes sync_time)")
    lines.append("")

    def block(title: str, part: pd.DataFrame) -> None:
        lines.append(f"== {title}: {len(part)} rows")
        lines.append(
            f"overall  median {part.ape.median():6.1f}   p90 {np.percentile(part.ape, 90):6.1f}   "
            f"(mean |log ratio| {np.mean(np.abs(np.log(part.predicted / part.step_time))):.3f})"
        )
        lines.append(summarize(part, "model").to_string())
        lines.append("")

    measured = df[~df.derived_compute]
    block("all rows (every model x GPU type x placement)", df)
    block(
        "rows whose single-GPU time is measured (excludes catalogue cells derived after rejection)", measured
    )
    block("multi-GPU rows only, measured single-GPU time", measured[measured.num_gpus > 1])
    block("clusters used by the link/overlap fit (aws, dgx-ext, rtx, quad)", df[df.cluster != "azure"])
    block(
        "Azure ND40rs_v2 rows (its own server type, fitted on placements-azure; see --heldout)",
        df[df.cluster == "azure"],
    )
    lines.append("== by GPU cluster and placement kind (all rows)")
    lines.append(summarize(df, ["cluster", "kind"]).to_string())
    lines.append("")
    lines.append("== by model and GPU cluster (all rows)")
    lines.append(summarize(df, ["model", "cluster"]).to_string())
    return "\n".join(lines) + "\n"


def preset_delta(old_catalog: Path) -> str:
    """Multi-GPU iteration time of every model on every preset with the bundled catalogue ÷ with ``old_catalog`` (e.g.
    ``git show main:gpusched_envs/data/catalog.yaml > old.yaml``): packed on one server for 2, 4, 8, 16 GPUs where a
    server has them, else on consecutive GPU ids, and spread one GPU per server. What a catalogue change moves."""
    from gpusched_envs.sim.throughput import predict_iteration_time
    from gpusched_envs.sim.topology import PRESETS, load_cluster

    new, old = default_catalog(), load_catalog(old_catalog)
    lines = [
        f"multi-GPU iteration time, bundled catalogue / {old_catalog}: median, min, max over models x placements"
    ]
    for preset in sorted(PRESETS):
        cn, co = load_cluster(preset, new), load_cluster(preset, old)
        placements = []
        for size in (2, 4, 8, 16):
            fits = np.flatnonzero(cn.server_num_gpus >= size)
            if len(fits):
                placements.append(np.flatnonzero(cn.gpu_server == fits[0])[:size])
            elif size <= cn.num_gpus:
                placements.append(np.arange(size))
            if cn.num_servers >= size:
                placements.append(np.array([np.flatnonzero(cn.gpu_server == k)[0] for k in range(size)]))
        r = np.array(
            [
                predict_iteration_time(cn, m, g).total / predict_iteration_time(co, m, g).total
                for g in placements
                for m in new.model_names
            ]
        )
        lines.append(
            f"  {preset:14s} {np.median(r):.4f}  {r.min():.3f}  {r.max():.3f}  ({len(r)} model x placement cases)"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sia-dir", type=Path, default=TRACES / "sia_pollux" / "throughput_profiles")
    p.add_argument("--catalog", type=Path, default=None, help="catalogue YAML (default: the bundled one)")
    p.add_argument("--scalability", action="store_true", help="also use scalability-<cluster>.csv rows")
    p.add_argument("--out", type=Path, default=None, help="write the report here (default: stdout only)")
    p.add_argument("--csv", type=Path, default=None, help="write every compared row here")
    p.add_argument("--reference", action="store_true", help="use the standalone formula, not the package's")
    p.add_argument(
        "--heldout",
        action="store_true",
        help="in-sample vs held-out report (second DGX run, scalability, Azure, leave-one-model/cluster-out; refits)",
    )
    p.add_argument("--gavel-dir", type=Path, default=TRACES / "gavel")
    p.add_argument(
        "--preset-delta",
        type=Path,
        default=None,
        metavar="OLD_CATALOG",
        help="ratio of every preset's multi-GPU iteration times, bundled catalogue / this one, and exit",
    )
    args = p.parse_args(argv)
    if args.preset_delta:
        print(preset_delta(args.preset_delta), end="")
        return 0
    if args.heldout:
        text = heldout_report(args.sia_dir, args.gavel_dir)
        print(text, end="")
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text)
        return 0
    global USE_REFERENCE
    USE_REFERENCE = args.reference
    catalog = load_catalog(args.catalog) if args.catalog else default_catalog()
    _load_doc(args.catalog)
    df, used = collect(catalog, args.sia_dir, args.scalability)
    text = report(df, used)
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    if args.csv:
        df.to_csv(args.csv, index=False)
    return 0


# ---------------------------------------------------------------------------------------------------------------------
# Held-out report: in-sample and held-out figures side by side, by placement class. Every figure is
# computed with build_catalog's fit formula (_predict_fit, the same as throughput.py: across servers the slower of NIC
# and intra-server link, the larger of their latencies). A row counts as held-out only if no fit used it: not the link
# / overlap fit (multi-GPU placements rows of aws, dgx-ext, rtx, quad) and not the catalogue's copied 1-GPU cells.
# ---------------------------------------------------------------------------------------------------------------------
HELDOUT_CLUSTERS = {
    **SIA_CLUSTERS,
    "dgx": SIA_CLUSTERS["dgx-ext"],
}  # 'dgx' = the second DGX-A100 profiling run
FIT_CLUSTERS = ("aws", "dgx-ext", "rtx", "quad")
HELDOUT_SETS = ("held-out: dgx second run", "held-out: scalability", "held-out: azure (3-5 VMs)")


def _rows_for_heldout(sia_dir: Path, times: dict, batches: dict, params: dict) -> pd.DataFrame:
    """Every Sia row at the catalogue batch (placements and scalability, all clusters) with the columns
    _predict_fit needs, and a ``set`` label: in-sample, dgx second run, scalability, azure."""
    import build_catalog as bc

    frames = []
    for m in bc.MODELS:
        if m.origin != "sia":
            continue
        for cluster, (gpu, intra, nic, _n) in HELDOUT_CLUSTERS.items():
            if cluster == "azure":  # its own server type: _azure_heldout
                continue
            pl = sia_placements(sia_dir, m.key, cluster).assign(source="placements")
            sc = scalability_rows(sia_dir, m.key, cluster).assign(source="scalability")
            keys = set(zip(pl.num_nodes, pl.num_gpus, pl.local_bsz, strict=True))
            sc = sc[[k not in keys for k in zip(sc.num_nodes, sc.num_gpus, sc.local_bsz, strict=True)]]
            df = pd.concat([pl, sc], ignore_index=True)
            df = df[df.local_bsz == batches[m.name]].copy()
            if df.empty:
                continue
            multi = df.num_nodes.to_numpy() > 1
            link = np.where(multi, nic, intra)
            df = df.assign(
                model=m.name,
                cluster=cluster,
                gpu=gpu,
                gradient_bytes=m.params * 4.0,
                nominal=[bc.LINKS[x][0] * 1e9 for x in link],
                family=[bc.FAMILIES.index(bc.LINK_FAMILY[x]) for x in link],
                nominal_intra=bc.LINKS[intra][0] * 1e9,
                family_intra=bc.FAMILIES.index(bc.LINK_FAMILY[intra]),
            )
            one = df.num_gpus == 1
            measured_cell = gpu in params["measured_on"][m.name]
            if cluster == "dgx":
                label = np.full(len(df), "held-out: dgx second run")
            else:
                label = np.where(
                    df.source == "scalability",
                    "held-out: scalability",
                    np.where(one & ~measured_cell, "held-out: derived 1-GPU", "in-sample"),
                )
            df["set"] = label
            df["kind"] = np.where(df.num_gpus == 1, "1 GPU", np.where(multi, "multi-server", "1 server"))
            frames.append(df)
    return pd.concat(frames, ignore_index=True)


def _azure_ape(rows: pd.DataFrame, params: dict, ib: tuple[float, float]) -> np.ndarray:
    import build_catalog as bc

    pred = bc.predict_azure(rows, params["bandwidth"], params["latency"], params["host_s_per_sample"], *ib)
    return np.abs(pred - rows.step_time.to_numpy()) / rows.step_time.to_numpy() * 100.0


def _azure_heldout(sia_dir, full, notes, batches, gammas, ib) -> tuple[pd.DataFrame, str]:
    """The ND40rs_v2 server type: fitted on placements-azure (in-sample), scored on scalability-azure (held out);
    also a stricter split by model (fit on three models' placements rows, score the other three's rows, both ways)."""
    import build_catalog as bc

    pl = bc.azure_rows(sia_dir, full, notes, batches, gammas, "placements").assign(source="placements")
    sc = bc.azure_rows(sia_dir, full, notes, batches, gammas, "scalability").assign(source="scalability")
    params = bc.fit_azure(pl, *ib)
    pl["ape"], sc["ape"] = _azure_ape(pl, params, ib), _azure_ape(sc, params, ib)
    pl["set"], sc["set"] = "in-sample", "held-out: azure (3-5 VMs)"
    rows = pd.concat([pl, sc], ignore_index=True).assign(cluster="azure")
    rows["kind"] = np.where(
        rows.num_gpus == 1, "1 GPU", np.where(rows.num_nodes > 1, "multi-server", "1 server")
    )
    # by model, 2-fold: halves fixed a priori (alphabetical order, alternate)
    halves = (("bert", "deepspeech2", "ncf"), ("cifar10", "imagenet", "yolov3"))
    parts = []
    for fit_on in halves:
        p = bc.fit_azure(pl[pl.model.isin(fit_on)], *ib)
        test = rows[~rows.model.isin(fit_on)].copy()
        test["ape"] = _azure_ape(test, p, ib)
        parts.append(test)
    by_model = pd.concat(parts)
    return rows, by_model


def _score(rows: pd.DataFrame, compute: dict, eff, lat, gamma: dict) -> np.ndarray:
    import build_catalog as bc

    models = sorted(rows.model.unique())
    c = rows.assign(
        compute=[compute[(m, g)] for m, g in zip(rows.model, rows.gpu, strict=True)],
        family=rows.family.astype(int),  # float after a concat with the azure rows (no link family there)
        family_intra=rows.family_intra.astype(int),
    )
    idx = c.model.map({m: i for i, m in enumerate(models)}).to_numpy()
    pred = bc._predict_fit(c, eff, lat, np.array([gamma[m] for m in models]), idx)
    return np.abs(pred - c.step_time.to_numpy()) / c.step_time.to_numpy() * 100.0


RULES = {
    "two-stage": "links fitted with one shared exponent, then each model's own exponent (shipped)",
    "joint": "links and per-model exponents fitted jointly, a new model gets the median exponent (earlier rule)",
    "shared": "one exponent for every model, fitted with the links",
}


def _network_fit(bc, fit_rows: pd.DataFrame, models: list[str], rule: str = "two-stage"):
    """(efficiency, latency, {model: γ}, γ of a model without a profile) of the link/overlap fit under ``rule``
    (RULES); a link family without fitted rows gets bc.link_arrays' default."""
    if rule == "two-stage":
        f = bc.fit_network_two_stage(fit_rows, models)
        new = f["shared_gamma"]
    elif rule == "shared":
        f = bc.fit_network(fit_rows.assign(model="all"), ["all"])
        new = f["gamma"]["all"]
        f["gamma"] = {m: new for m in SIA_MODELS}
    else:
        f = bc.fit_network(fit_rows, models)
        new = float(np.median([f["gamma"][m] for m in models]))
    e, la = bc.link_arrays(f)
    return e, la, f["gamma"], new


def _leave_one_model_out(rows, fit_rows, sia, compute, held_models, rule: str = "two-stage") -> pd.DataFrame:
    """Refit links, exponents and the Azure server type without the model (none of its rows in any fit); it gets
    the exponent the rule gives a model without a profile."""
    import build_catalog as bc

    lomo = []
    for held in held_models:
        others = [m for m in sia if m != held]
        e, la, g, new = _network_fit(bc, fit_rows[fit_rows.model != held], others, rule)
        g = {**g, held: new}
        part = rows[(rows.model == held) & (rows.num_gpus > 1) & (rows.cluster != "azure")].copy()
        part["ape"] = _score(part, compute, e, la, g)
        part["held"] = held
        lomo.append(part)
        # its azure rows: the server type refitted on the other models' placements-azure rows
        ib = (
            bc.LINKS["ib100"][0] * 1e9 * e[bc.FAMILIES.index("infiniband")],
            la[bc.FAMILIES.index("infiniband")],
        )
        az = rows[(rows.cluster == "azure") & (rows.num_gpus > 1)]
        az = az.assign(gamma=az.model.map(g))  # exponents of this refit
        p = bc.fit_azure(az[(az.model != held) & (az.source == "placements")], *ib)
        part = az[az.model == held].copy()
        part["ape"] = _azure_ape(part, p, ib)
        part["held"] = held
        lomo.append(part)
    return pd.concat(lomo)


def _leave_one_cluster_out(rows, fit_rows, measured, compute, sia, clusters) -> pd.DataFrame:
    """Refit links and exponents without the cluster, and derive its GPU type's 1-GPU times of the Sia models from
    the other measured cells (the held cluster's cells removed from the speed fit); score its placements rows, with
    the derived 1-GPU times (``ape``) and with the measured ones (``ape_measured_1gpu``: the network part alone)."""
    import build_catalog as bc

    loco = []
    for held in clusters:
        gpu = SIA_CLUSTERS[held][0]
        reduced = {
            m: {g: t for g, t in v.items() if not (m in sia and g == gpu)} for m, v in measured.items()
        }
        predict, _ = bc.fit_speed({m: v for m, v in reduced.items() if v})
        comp = dict(compute)
        for m in sia:
            comp[(m, gpu)] = predict(m, gpu)
        e, la, g, _new = _network_fit(bc, fit_rows[fit_rows.cluster != held], sia)
        part = rows[(rows.cluster == held) & (rows.source == "placements")].copy()
        part["ape"] = _score(part, comp, e, la, g)
        part["ape_measured_1gpu"] = _score(part, compute, e, la, g)
        part["held"] = held
        loco.append(part)
    return pd.concat(loco)


def heldout_report(sia_dir: Path, gavel_dir: Path, quick: bool = False) -> str:
    import argparse as _ap

    import build_catalog as bc

    args = _ap.Namespace(sia_dir=sia_dir, gavel_dir=gavel_dir)
    gavel = bc.load_gavel(gavel_dir)
    measured, notes, batches = bc.measured_times(args, gavel)
    measured = {m: v for m, v in measured.items() if v}
    full = {m: dict(v) for m, v in measured.items()}
    bc.fill_derived(
        full,
        {m: dict(v) for m, v in notes.items()},
        bc.pipedream_vgg_ratio(bc.TRACES / "alibaba_v2018_dag" / "dl_dag"),
        gavel,
    )
    sia = [m.name for m in bc.MODELS if m.origin == "sia"]
    params = {"measured_on": {m: set(measured.get(m, {})) for m in sia}}
    rows = _rows_for_heldout(sia_dir, full, batches, params)
    fit_rows = bc.sia_rows(args, full, notes, batches)
    fit = bc.fit_network_two_stage(fit_rows, sia)
    eff, lat = bc.link_arrays(fit)
    compute = {(m, g): full[m][g] for m in sia for g in bc.GPU_TYPES}
    rows["ape"] = _score(rows, compute, eff, lat, fit["gamma"])
    ib = (bc.LINKS["ib100"][0] * 1e9 * fit["efficiency"]["infiniband"], fit["latency"]["infiniband"])
    azure, azure_by_model = _azure_heldout(sia_dir, full, notes, batches, fit["gamma"], ib)
    rows = pd.concat([rows, azure], ignore_index=True)

    lines = ["Held-out fidelity (APE = |pred - meas| / meas, %; median / p90 / rows)", ""]

    def fmt(x: pd.Series) -> str:
        return f"{x.median():5.1f} / {np.percentile(x, 90):5.1f} / {len(x):5d}" if len(x) else "—"

    lines.append(f"{'set':34s} {'all':>20s} {'1 GPU':>20s} {'1 server':>20s} {'multi-server':>20s}")
    order = [
        "in-sample",
        "held-out: dgx second run",
        "held-out: scalability",
        "held-out: azure (3-5 VMs)",
        "held-out: derived 1-GPU",
    ]
    for name in order:
        part = rows[rows.set == name]
        cells = [fmt(part.ape)] + [
            fmt(part.ape[part.kind == k]) for k in ("1 GPU", "1 server", "multi-server")
        ]
        lines.append(f"{name:34s} " + " ".join(f"{c:>20s}" for c in cells))
    pooled = rows[rows.set.isin(order[1:4])]
    lines.append(f"{'held-out pooled (dgx2+scal+azure)':34s} {fmt(pooled.ape):>20s}")
    no_azure = rows[rows.set.isin(order[1:3])]
    lines.append(f"{'held-out pooled without azure':34s} {fmt(no_azure.ape):>20s}")
    lines.append(
        f"azure, split by model instead (fit on bert/deepspeech2/ncf, score the others, and back; every azure "
        f"row): {fmt(azure_by_model.ape)}"
    )
    lines.append(
        "  "
        + ", ".join(f"{k} {fmt(p.ape)}" for k, p in azure_by_model.groupby("kind"))
        + "; "
        + ", ".join(f"{m} {fmt(p.ape)}" for m, p in azure_by_model.groupby("model"))
    )
    lines.append("")
    lines.append("held-out by cluster and placement class:")
    lines.append(
        rows[rows.set != "in-sample"]
        .groupby(["set", "cluster", "kind"])
        .ape.agg(rows="size", median="median", p90=lambda x: np.percentile(x, 90))
        .round(1)
        .to_string()
    )
    lines.append("")

    lomo = _leave_one_model_out(rows, fit_rows, sia, compute, sia if not quick else sia[:2])
    lines.append(f"leave-one-model-out (multi-GPU rows of the held model, every set): {fmt(lomo.ape)}")
    lines.append("  " + ", ".join(f"{m} {fmt(p.ape)}" for m, p in lomo.groupby("held")))
    lines.append(
        f"leave-one-model-out, azure rows only (ND40rs_v2 type refitted without the model): "
        f"{fmt(lomo.ape[lomo.cluster == 'azure'])}"
    )
    clean = lomo[lomo.cluster != "azure"]
    lines.append(f"leave-one-model-out without the Azure rows: {fmt(clean.ape)}")
    lines.append("  " + ", ".join(f"{m} {fmt(p.ape)}" for m, p in clean.groupby("held")))

    clusters = FIT_CLUSTERS if not quick else FIT_CLUSTERS[:1]
    loco = _leave_one_cluster_out(rows, fit_rows, measured, compute, sia, clusters)
    lines.append(
        f"leave-one-cluster-out (placements rows of the held cluster, 1-GPU times derived): {fmt(loco.ape)}"
    )
    lines.append("  " + ", ".join(f"{c} {fmt(p.ape)}" for c, p in loco.groupby("held")))
    lines.append("  by class: " + ", ".join(f"{k} {fmt(p.ape)}" for k, p in loco.groupby("kind")))
    lines.append(
        "leave-one-cluster-out with the held cluster's measured 1-GPU times (the network part alone): "
        + fmt(loco.ape_measured_1gpu)
    )
    lines.append("  " + ", ".join(f"{c} {fmt(p.ape_measured_1gpu)}" for c, p in loco.groupby("held")))
    if not quick:
        azure_args = (sia_dir, full, notes, batches)
        lines += ["", *_alternative_rules(rows, fit_rows, sia, compute, fmt, azure_args)]
    return "\n".join(lines) + "\n"


def _alternative_rules(rows, fit_rows, sia, compute, fmt, azure_args) -> list[str]:
    """The same figures under the other exponent rules (RULES), for comparison. Not shipped."""
    import build_catalog as bc

    out = []
    for rule in ("joint", "shared"):
        e, la, g, new = _network_fit(bc, fit_rows, sia, rule)
        plain = rows[rows.cluster != "azure"].copy()
        plain["ape"] = _score(plain, compute, e, la, g)
        out.append(f"alternative, not shipped: {RULES[rule]} (new-model γ = {new:.3f})")
        ib = (
            bc.LINKS["ib100"][0] * 1e9 * e[bc.FAMILIES.index("infiniband")],
            la[bc.FAMILIES.index("infiniband")],
        )
        azure, _by_model = _azure_heldout(*azure_args, g, ib)
        plain = pd.concat([plain, azure], ignore_index=True)
        for name, part in plain.groupby("set"):
            out.append(f"  {name:32s} {fmt(part.ape)}")
        held = plain.set.isin(HELDOUT_SETS)
        out.append(f"  {'held-out pooled':32s} {fmt(plain.ape[held])}")
        lomo = _leave_one_model_out(rows, fit_rows, sia, compute, sia, rule)
        clean = lomo.ape[lomo.cluster != "azure"]
        out.append(f"  leave-one-model-out, every set: {fmt(lomo.ape)}; without azure: {fmt(clean)}")
        out.append("  " + ", ".join(f"{m} {fmt(p.ape)}" for m, p in lomo.groupby("held")))
    return out


if __name__ == "__main__":
    assert parse_placement(1234) == (1, 2, 3, 4)
    sys.exit(main())
