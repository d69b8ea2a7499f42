package process_test

import (
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/runtimetest"
)

func TestConformance(t *testing.T) {
	runtimetest.Run(t, runtimetest.Harness{
		New: func(t *testing.T) runtime.Runtime {
			rt, _ := testRuntime(t)
			return rt
		},
		LongRunning: []string{"sleep", "300"},
	})
}
