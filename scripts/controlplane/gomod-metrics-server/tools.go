//go:build tools

// The main package ../build.sh --with-metrics-server builds; importing it
// here makes `go mod tidy` record every module it needs in go.mod and go.sum.
package tools

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
