//go:build tools

// The node's container runtime, network plugins and NetworkPolicy enforcer (localhosts/kubebuild.py
// builds them): one module graph, so the packages they share compile once. runc needs cgo and
// libseccomp; the rest are static.
package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/opencontainers/runc"
	_ "sigs.k8s.io/kube-network-policies/cmd"
)
