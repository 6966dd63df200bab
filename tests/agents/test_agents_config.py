"""The one YAML run-configuration reader of the agents (agents.common.read_config): a path or a name in the config
folder, a mapping of known keys, one clear error otherwise."""

from __future__ import annotations

import pytest
from gpusched_lab.agents.common import read_config, resolve_config_path

KNOWN = ("steps", "args")


def test_a_name_resolves_in_the_config_folder_with_or_without_yaml(tmp_path):
    (tmp_path / "small.yaml").write_text("steps: 12\nargs: {hidden: 8}\n")
    assert resolve_config_path("small", tmp_path) == tmp_path / "small.yaml"
    path, doc = read_config("small.yaml", tmp_path, KNOWN)
    assert path == tmp_path / "small.yaml" and doc == {"steps": 12, "args": {"hidden": 8}}
    (tmp_path / "empty.yaml").write_text("")
    assert read_config(tmp_path / "empty.yaml", tmp_path, KNOWN)[1] == {}


def test_bad_configs_fail_in_one_line_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"config nope not found .*: small"):
        (tmp_path / "small.yaml").write_text("steps: 1\n")
        read_config("nope", tmp_path, KNOWN)
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match=r"list.yaml: a config is a mapping"):
        read_config("list", tmp_path, KNOWN)
    (tmp_path / "typo.yaml").write_text("stpes: 1\n")
    with pytest.raises(ValueError, match=r"typo.yaml: unknown keys \['stpes'\]"):
        read_config("typo", tmp_path, KNOWN)
    (tmp_path / "broken.yaml").write_text("steps: [1, 2\n")
    with pytest.raises(ValueError, match=r"broken.yaml: invalid YAML"):
        read_config("broken", tmp_path, KNOWN)


def test_hmarl_configs_are_read_by_the_shared_reader(tmp_path):
    from gpusched_lab.agents.methods.hmarl.agent import load_config

    assert load_config("hmarl").args  # a shipped config by name
    (tmp_path / "h.yaml").write_text("steps: 64\nbogus: 1\n")
    with pytest.raises(ValueError, match=r"h.yaml: unknown keys \['bogus'\]"):
        load_config(tmp_path / "h.yaml")
