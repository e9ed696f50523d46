"""The local cluster's builds are cached by their recipe (localhosts/kube/kubebuild.py): a folder that
exists is complete, a failed build leaves nothing, and a changed pin or flag is a new folder."""

from __future__ import annotations

import shutil

import pytest

from localhosts.kube import kubebuild
from localhosts.kube.kubebuild import Artifact, BuildError


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEAR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_failed_build_leaves_no_folder_and_a_finished_one_is_reused(cache):
    calls = []

    def failing(out):
        (out / "tool").write_text("half")
        raise BuildError("compiler crashed")

    def working(out):
        calls.append(out)
        (out / "tool").write_text("whole")

    with pytest.raises(BuildError, match="compiler crashed"):
        Artifact("tool", "k1", ("tool",), failing).ensure()
    # Neither the folder nor a temporary one (the build's lock file stays: it holds nothing).
    assert not [p for p in (cache / "kubernetes").iterdir() if not p.name.endswith(".lock")]

    folder = Artifact("tool", "k1", ("tool",), working).ensure()
    assert folder == cache / "kubernetes" / "tool-k1"
    assert (folder / "tool").read_text() == "whole"
    assert Artifact("tool", "k1", ("tool",), working).ensure() == folder
    assert len(calls) == 1


def test_a_build_that_makes_too_little_is_refused(cache):
    with pytest.raises(BuildError, match="made no etcd"):
        Artifact("etcd", "k1", ("etcd",), lambda out: None).ensure()
    assert not [p for p in (cache / "kubernetes").iterdir() if not p.name.endswith(".lock")]


def test_a_changed_module_pin_or_recipe_is_a_new_build_folder(tmp_path, monkeypatch):
    before = kubebuild.etcd().folder
    assert kubebuild.etcd().folder == before  # the key is stable
    modules = tmp_path / "kube"
    shutil.copytree(kubebuild.KUBE_MODULES, modules)
    monkeypatch.setattr(kubebuild, "KUBE_MODULES", modules)
    with open(modules / "etcd" / "go.sum", "a") as go_sum:
        go_sum.write("example.com/other v1.0.0 h1:AAAA=\n")
    pinned_otherwise = kubebuild.etcd().folder
    monkeypatch.setattr(kubebuild, "RECIPE", kubebuild.RECIPE + 1)
    assert len({before, pinned_otherwise, kubebuild.etcd().folder}) == 3


def test_the_provider_builds_first_so_the_tests_that_need_only_it_need_not_wait_for_the_cluster(
        monkeypatch):
    ensured = []
    monkeypatch.setattr(Artifact, "ensure", lambda self: ensured.append(self.name))
    monkeypatch.setattr(kubebuild, "install_provider_plugin", lambda: ensured.append("provider"))
    kubebuild.ensure_all()
    assert ensured == ["provider", "etcd", "gvisor", "node", "kubernetes"]


def test_build_only_builds_the_provider_without_installing_it_and_an_unknown_name_is_refused(
        monkeypatch, capsys):
    done = []
    monkeypatch.setattr(Artifact, "ensure", lambda self: done.append(self.name) or self.folder)
    monkeypatch.setattr(kubebuild, "install_provider_plugin", lambda: done.append("plugin"))
    assert kubebuild.main(["--build-only"]) == 0
    assert done == ["provider", "etcd", "gvisor", "node", "kubernetes"]
    done.clear()
    assert kubebuild.main(["provider"]) == 0
    assert done == ["plugin"]
    done.clear()
    assert kubebuild.main(["etcd", "kubelet"]) == 1
    assert done == []
    assert "unknown artifact kubelet; allowed: provider, etcd, gvisor, node, kubernetes" in capsys.readouterr().err
