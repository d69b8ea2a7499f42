// Package plugins holds the scheduler's plugins, one file each, named and behaving as kube-scheduler's in-tree
// plugins of the same name (their arguments are kube-scheduler's v1 configuration types).
package plugins

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// Factory builds a plugin from its arguments (nil: the defaults) and the framework handle.
type Factory func(args runtime.Object, h framework.Handle) (framework.Plugin, error)

// Registry is every plugin by name.
func Registry() map[string]Factory {
	return map[string]Factory{
		NodeUnschedulableName:          newNodeUnschedulable,
		NodeNameName:                   newNodeName,
		NodePortsName:                  newNodePorts,
		NodeAffinityName:               newNodeAffinity,
		TaintTolerationName:            newTaintToleration,
		NodeResourcesFitName:           newNodeResourcesFit,
		NodeResourcesBalancedAllocName: newBalancedAllocation,
		InterPodAffinityName:           newInterPodAffinity,
		PodTopologySpreadName:          newPodTopologySpread,
		DefaultPreemptionName:          newDefaultPreemption,
	}
}
