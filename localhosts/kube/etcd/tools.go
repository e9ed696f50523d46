//go:build tools

// The command built from this module; the blank import keeps its packages in go.mod.
package tools

import _ "go.etcd.io/etcd/server/v3"
