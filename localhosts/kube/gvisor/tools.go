//go:build tools

// The local node's sandbox runtime: gVisor's runsc and its containerd shim
// (localhosts/kubebuild.py builds them), pinned here by their module's version.
package tools

import (
	_ "gvisor.dev/gvisor/runsc"
	_ "gvisor.dev/gvisor/shim"
)
