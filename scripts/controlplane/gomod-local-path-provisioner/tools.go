//go:build tools

// The main package ../build.sh builds; importing it here makes `go mod tidy`
// record every module it needs in go.mod and go.sum.
package tools

import _ "github.com/rancher/local-path-provisioner"
