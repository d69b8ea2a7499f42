package plugins

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/wheelhouse-dev/wheelhouse/scheduler/framework"
)

// NodeUnschedulable: a cordoned node (spec.unschedulable) takes only pods tolerating the
// node.kubernetes.io/unschedulable NoSchedule taint.
const NodeUnschedulableName = "NodeUnschedulable"

type nodeUnschedulable struct{}

func newNodeUnschedulable(runtime.Object, framework.Handle) (framework.Plugin, error) {
	return nodeUnschedulable{}, nil
}

func (nodeUnschedulable) Name() string { return NodeUnschedulableName }

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

func (nodeUnschedulable) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	n := node.Node()
	if n == nil || !n.Spec.Unschedulable {
		return nil
	}
	for i := range pod.Pod.Spec.Tolerations {
		if tolerates(&pod.Pod.Spec.Tolerations[i], &unschedulableTaint) {
			return nil
		}
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) were unschedulable")
}

func (nodeUnschedulable) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventNode, ActionType: framework.Add | framework.UpdateNodeTaint}}
}

// NodeName: a pod that names a node fits only that node.
const NodeNameName = "NodeName"

type nodeName struct{}

func newNodeName(runtime.Object, framework.Handle) (framework.Plugin, error) { return nodeName{}, nil }

func (nodeName) Name() string { return NodeNameName }

func (nodeName) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	if pod.Pod.Spec.NodeName == "" || pod.Pod.Spec.NodeName == node.Name() {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match the requested node name")
}

func (nodeName) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventNode, ActionType: framework.Add}}
}

// NodePorts: a pod's host ports must be free on the node.
const NodePortsName = "NodePorts"

type nodePorts struct{}

type nodePortsState []framework.HostPort

func (s nodePortsState) Clone() framework.StateData { return s }

func newNodePorts(runtime.Object, framework.Handle) (framework.Plugin, error) {
	return nodePorts{}, nil
}

func (nodePorts) Name() string { return NodePortsName }

func (nodePorts) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ *framework.Snapshot) *framework.Status {
	ports := pod.HostPorts
	if len(ports) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(NodePortsName, nodePortsState(ports))
	return nil
}

func (nodePorts) Filter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	// Without PreFilter's state (PreFilter disabled in the profile) the ports are read here.
	var ports []framework.HostPort
	if d, ok := state.Read(NodePortsName); ok {
		ports = d.(nodePortsState)
	} else {
		ports = pod.HostPorts
	}
	for _, p := range ports {
		if node.UsedPorts.Conflicts(p) {
			return framework.NewStatus(framework.Unschedulable, "node(s) didn't have free ports for the requested pod ports")
		}
	}
	return nil
}

func (nodePorts) EventsToRegister() []framework.ClusterEvent {
	return []framework.ClusterEvent{{Resource: framework.EventPod, ActionType: framework.Delete},
		{Resource: framework.EventNode, ActionType: framework.Add}}
}

// tolerates is Toleration.ToleratesTaint without the alpha comparison operators.
func tolerates(tol *corev1.Toleration, t *corev1.Taint) bool {
	return tol.ToleratesTaint(klog.Background(), t, false)
}
