"""The local cluster's NetworkPolicy enforcer (localhosts/kube/network_policies.py): what it is run as,
and that the node's own configuration and cleanup agree with it."""

from __future__ import annotations

import re

from localhosts.kube import kubebuild, kubenode, network_policies

API_SERVER_PORT = 6440


def daemonset() -> dict:
    [obj] = [obj for path, obj in network_policies.manifests(API_SERVER_PORT)
             if path.endswith("/daemonsets")]
    return obj


def test_the_enforcer_runs_on_the_nodes_network_with_net_admin_alone_and_never_privileged():
    spec = daemonset()["spec"]["template"]["spec"]
    [container] = spec["containers"]
    assert spec["hostNetwork"] is True
    assert container["securityContext"] == {"capabilities": {"add": ["NET_ADMIN"]}}
    assert "privileged" not in str(container)


def test_the_enforcer_asks_the_api_server_where_it_listens_since_its_service_has_no_endpoint():
    env = {e["name"]: e["value"] for e in daemonset()["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env == {"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                   "KUBERNETES_SERVICE_PORT": str(API_SERVER_PORT)}


def test_the_enforcer_reads_the_nri_socket_where_the_nodes_containerd_writes_it(tmp_path, monkeypatch):
    assert kubenode.NRI_DIR.is_relative_to(kubenode.CONTAINERD_RUN)  # which the cleanup removes
    # The node's run folder moved here, so writing the configs touches nothing of the machine's.
    monkeypatch.setattr(kubenode, "CONTAINERD_RUN", tmp_path / "run")
    monkeypatch.setattr(kubenode, "NRI_DIR", tmp_path / "run" / "nri")
    spec = daemonset()["spec"]["template"]["spec"]
    [volume] = spec["volumes"]
    assert volume["hostPath"]["path"] == str(kubenode.NRI_DIR)
    assert spec["containers"][0]["volumeMounts"] == [{"name": volume["name"],
                                                      "mountPath": "/var/run/nri"}]
    (tmp_path / "pki").mkdir()
    kubenode.write_configs(tmp_path, tmp_path / "pki", {user: tmp_path / user for user in (
        kubenode.KUBELET_USER, kubenode.KUBE_PROXY_USER)})
    containerd = (tmp_path / "containerd" / "config.toml").read_text()
    assert f'socket_path = "{tmp_path / "run" / "nri" / "nri.sock"}"' in containerd


def test_the_enforcers_image_is_the_version_the_nodes_go_build_compiles():
    go_mod = (kubebuild.KUBE_MODULES / "node" / "go.mod").read_text()
    assert re.search(rf"\t{kubebuild.NETPOL_MODULE} {network_policies.version()}\n", go_mod)
    image = daemonset()["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"{network_policies.REPOSITORY}:{network_policies.version()}"


def test_the_nodes_cleanup_removes_the_enforcers_table_which_outlives_a_killed_enforcer():
    assert kubenode.NETPOL_TABLE in kubenode.NFT_TABLES
