//go:build tools

// The main package ../build.sh --with-kubemark builds; importing it here makes
// `go mod tidy` record every module it needs in go.mod and go.sum.
package tools

import _ "k8s.io/kubernetes/cmd/kubemark"
