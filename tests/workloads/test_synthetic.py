import numpy as np
import pytest

from gpusched_envs.workloads import WorkloadError, generate_synthetic, load_fit

N = 200_000  # large enough for the rare GPU sizes (16+ GPUs: 0.35 %) to be stable within 10 %


@pytest.fixture(scope="module")
def synth():
    return generate_synthetic(N, seed=0)


def _size_bins(gpus):
    return np.array(
        [np.mean(gpus == 1), np.mean(gpus == 2), np.mean(gpus == 4), np.mean(gpus == 8), np.mean(gpus > 8)]
    )


def test_fit_matches_philly(philly, synth):
    assert len(synth) == N
    assert synth.duration.mean() == pytest.approx(philly.duration.mean(), rel=0.10)
    assert np.percentile(synth.duration, 95) == pytest.approx(np.percentile(philly.duration, 95), rel=0.10)
    assert np.percentile(synth.duration, 50) == pytest.approx(np.percentile(philly.duration, 50), rel=0.10)
    np.testing.assert_allclose(_size_bins(synth.num_gpus), _size_bins(philly.num_gpus), rtol=0.10)
    assert set(np.unique(synth.num_gpus).tolist()) <= set(np.unique(philly.num_gpus).tolist())
    assert synth.duration.min() >= 1.0


def test_fit_file_records_command():
    fit = load_fit("philly")
    assert fit["command"] == "python scripts/data/fit_philly.py"
    assert fit["source"]["jobs"] == 82_247
    assert len(fit["arrivals"]["diurnal_profile"]) == 24
    assert sum(fit["gpu_sizes"]["probs"]) == pytest.approx(1.0)


def test_poisson_rate(synth):
    fit = load_fit("philly")
    rate = (len(synth) - 1) / (synth.submit_time[-1] - synth.submit_time[0]) * 3600
    assert rate == pytest.approx(fit["arrivals"]["rate_per_hour"], rel=0.02)
    fast = generate_synthetic(20_000, seed=1, rate=120.0)
    assert (len(fast) - 1) / (fast.submit_time[-1] - fast.submit_time[0]) * 3600 == pytest.approx(
        120.0, rel=0.03
    )


def test_diurnal_profile():
    wl = generate_synthetic(100_000, seed=2, arrival="diurnal")
    hours = ((wl.submit_time % 86_400) // 3_600).astype(int)
    observed = np.bincount(hours, minlength=24) / len(wl) * 24
    profile = np.asarray(load_fit("philly")["arrivals"]["diurnal_profile"])
    np.testing.assert_allclose(observed, profile / profile.mean(), rtol=0.08)


def test_load_models_and_seeds():
    a = generate_synthetic(5_000, seed=3, load=0.9, gpus=64, models="resnet50+bert@3")
    assert a.offered_load(64) == pytest.approx(0.9, rel=1e-12)
    assert a.model_names == ("resnet50", "bert")
    assert np.mean(a.model == 1) == pytest.approx(0.75, abs=0.03)
    b = generate_synthetic(5_000, seed=3, load=0.9, gpus=64, models="resnet50+bert@3")
    assert a.fingerprint() == b.fingerprint()
    # the model mix draws from its own stream: sizes and durations do not change with it
    c = generate_synthetic(5_000, seed=3, load=0.9, gpus=64)
    assert np.array_equal(a.num_gpus, c.num_gpus) and np.array_equal(a.duration, c.duration)
    assert np.all(c.model == -1)
    assert generate_synthetic(5_000, seed=4).fingerprint() != generate_synthetic(5_000, seed=5).fingerprint()


def test_max_gpus_and_errors():
    wl = generate_synthetic(20_000, seed=0, max_gpus=8)
    assert wl.num_gpus.max() <= 8
    with pytest.raises(WorkloadError, match="field 'jobs'"):
        generate_synthetic(0)
    with pytest.raises(WorkloadError, match="field 'models'"):
        generate_synthetic(10, models="a@x")
    with pytest.raises(WorkloadError, match="field 'rate'"):
        generate_synthetic(10, rate=-1.0)
