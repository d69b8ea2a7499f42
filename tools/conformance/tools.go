//go:build tools

// Package conformance pins upstream Kubernetes' end-to-end suite, whose [Conformance] tests are the yardstick every
// certified distribution is measured by. scripts/e2e-test.sh compiles the test binary of k8s.io/kubernetes/test/e2e
// (`go test -c`), the same e2e.test that upstream ships, from the k8s.io/kubernetes version required in go.mod.
//
// This file is never built (the tools tag is never set); it exists so that `go mod tidy` keeps go.sum complete for
// that build. Tidy records the dependencies of this module's own packages and tests, not of a dependency's tests, so
// besides the package itself it imports everything that package's e2e_test.go imports: the test sources of each SIG
// and the framework's init packages. When bumping k8s.io/kubernetes, compare this list with upstream's
// test/e2e/e2e_test.go; a missing entry shows as a "missing go.sum entry" error from the build.
//
// It also imports the ginkgo command at the version the suite is built with: running the suite as parallel
// processes takes `ginkgo -p e2e.test`, and that CLI should be the same version as the library inside e2e.test.
package conformance

import (
	_ "github.com/onsi/ginkgo/v2"
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "go.yaml.in/yaml/v2"
	_ "k8s.io/component-base/version"
	_ "k8s.io/klog/v2"

	_ "k8s.io/kubernetes/test/conformance/testdata"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/e2e/apimachinery"
	_ "k8s.io/kubernetes/test/e2e/apps"
	_ "k8s.io/kubernetes/test/e2e/architecture"
	_ "k8s.io/kubernetes/test/e2e/auth"
	_ "k8s.io/kubernetes/test/e2e/autoscaling"
	_ "k8s.io/kubernetes/test/e2e/common"
	_ "k8s.io/kubernetes/test/e2e/dra"
	_ "k8s.io/kubernetes/test/e2e/feature"
	_ "k8s.io/kubernetes/test/e2e/framework"
	_ "k8s.io/kubernetes/test/e2e/framework/config"
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
	_ "k8s.io/kubernetes/test/e2e/framework/testfiles"
	_ "k8s.io/kubernetes/test/e2e/instrumentation"
	_ "k8s.io/kubernetes/test/e2e/invariants"
	_ "k8s.io/kubernetes/test/e2e/invariants/logcheck"
	_ "k8s.io/kubernetes/test/e2e/kubectl"
	_ "k8s.io/kubernetes/test/e2e/network"
	_ "k8s.io/kubernetes/test/e2e/node"
	_ "k8s.io/kubernetes/test/e2e/scheduling"
	_ "k8s.io/kubernetes/test/e2e/storage"
	_ "k8s.io/kubernetes/test/e2e/storage/csimock"
	_ "k8s.io/kubernetes/test/e2e/storage/external"
	_ "k8s.io/kubernetes/test/e2e/testing-manifests"
	_ "k8s.io/kubernetes/test/e2e/windows"
	_ "k8s.io/kubernetes/test/fixtures"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/utils/ktesting/format"
)
