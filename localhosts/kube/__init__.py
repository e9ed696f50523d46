"""The local Kubernetes cluster that stands in for a production cluster: real etcd, API server,
controller manager and scheduler, and one real node (containerd, runc, the CNI plugins, the
kubelet, kube-proxy, kube-network-policies, gVisor's runsc), all built here from the Go modules
pinned in this folder's subfolders; its certificates and its command line."""
