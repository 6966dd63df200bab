"""The code reproduces the reference corpus (``record_corpus.py``): run metrics equal to 1e-9 relative (ints,
counts and finish-time hashes exactly), env trajectory hashes identical."""

from __future__ import annotations

import json

import pytest

from tests.reference import record_corpus as rc


def _load(part: str) -> dict:
    return json.loads(rc.corpus_path(part).read_text())


def _mismatches(expected: dict, actual: dict) -> list[str]:
    keys = sorted(set(expected) | set(actual))
    return [
        f"{k}: recorded {expected.get(k)!r}, now {actual.get(k)!r}"
        for k in keys
        if k not in expected or k not in actual or not rc.values_match(k, expected[k], actual[k])
    ]


METRICS = _load("metrics")
CLUSTERS = sorted({json.loads(k)["cluster"] for k in METRICS})


def test_corpus_covers_every_case():
    assert sorted(METRICS) == sorted(rc.case_key(c) for c in rc.metric_cases())
    assert sorted(_load("envs")) == sorted(rc.case_key(c) for c in rc.env_cases())
    assert sorted(_load("replays")) == sorted(rc.replay_cases())


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_metrics_match_the_corpus(cluster):
    bad = []
    for key, expected in METRICS.items():
        case = json.loads(key)
        if case["cluster"] != cluster:
            continue
        actual = rc.encode_values(rc.run_metric_case(case))
        bad += [f"{key}: {m}" for m in _mismatches(expected, actual)]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "philly_full" else n for n in rc.replay_cases()]
)
def test_replays_match_the_corpus(name):
    expected = _load("replays")[name]
    actual = rc.encode_values(rc.run_replay(name))
    assert not _mismatches(expected, actual)


ENVS = _load("envs")


@pytest.mark.parametrize("key", sorted(ENVS))
def test_env_trajectories_match_the_corpus(key):
    """Observations, masks, rewards and episode ends bit for bit; the infos too (their hash is kept apart so a
    deliberate change of the info schema is re-recorded alone, with its reason in the commit)."""
    actual = rc.run_env_case(json.loads(key))
    assert actual["dynamics"] == ENVS[key]["dynamics"], "observations, masks, rewards or episode ends changed"
    assert actual["infos"] == ENVS[key]["infos"], "the info dicts changed"
