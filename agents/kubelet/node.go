package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// NodeConfig configures a node's registration, status and Lease. Zero fields take the defaults noted.
type NodeConfig struct {
	Name string
	// Labels and Taints are added at registration (kubelet's --node-labels and --register-with-taints); the
	// standard labels kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch are always set.
	Labels map[string]string
	Taints []corev1.Taint
	// MaxPods is the pods capacity (default 110).
	MaxPods int
	// KubeletVersion and RuntimeVersion go into status.nodeInfo.
	KubeletVersion, RuntimeVersion string
	// Host reads the machine's facts (ReadHost in production).
	Host func() (Host, error)
	// Healthy reports why the node cannot run pods (the runtime is down, ...); nil: Ready.
	Healthy func() error
	// Recorder, when set, records the Node's NodeReady / NodeNotReady events when its Ready condition changes,
	// as kubelet's ("Node n1 status is now: NodeNotReady").
	Recorder record.EventRecorder
	// LeaseDuration is the Lease's leaseDurationSeconds (default 40 s); the Lease renews every RenewInterval
	// (default 10 s); the status is checked every StatusInterval (default 10 s) and posted when it changed or
	// ReportInterval (default 5 min, upstream's nodeStatusReportFrequency) has passed.
	LeaseDuration, RenewInterval, StatusInterval, ReportInterval time.Duration
	Clock                                                        clock.WithTicker
	Logger                                                       *slog.Logger
}

func (c NodeConfig) withDefaults() NodeConfig {
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 40 * time.Second
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = 10 * time.Second
	}
	if c.StatusInterval == 0 {
		c.StatusInterval = 10 * time.Second
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = 5 * time.Minute
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Healthy == nil {
		c.Healthy = func() error { return nil }
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Node keeps one Node object, its status and its Lease in step with the machine.
type Node struct {
	cfg NodeConfig
	cs  kubernetes.Interface
	log *slog.Logger
	// node is the last Node read or written (owned by the Run goroutine after Register).
	node *corev1.Node
	// reported is when the status was last posted.
	reported time.Time
	// lease is the Lease as last written (nil: read it before the next renewal).
	lease *coordinationv1.Lease
	// lastReady is the Ready status last posted (for the NodeReady / NodeNotReady events).
	lastReady corev1.ConditionStatus
}

// NewNode returns a Node for the cluster behind cs (a client with the node's credential).
func NewNode(cs kubernetes.Interface, cfg NodeConfig) (*Node, error) {
	if cfg.Name == "" || cfg.Host == nil {
		return nil, errors.New("kubelet: a node needs a name and a Host reader")
	}
	cfg = cfg.withDefaults()
	return &Node{cfg: cfg, cs: cs, log: cfg.Logger.With("node", cfg.Name)}, nil
}

// Object is the Node as last read or written.
func (n *Node) Object() *corev1.Node { return n.node }

// Register creates the Node, or adopts the existing one of this name (a restarted agent) and adds the standard
// labels it lacks, then posts the status and creates or renews the Lease.
func (n *Node) Register(ctx context.Context) error {
	h, err := n.cfg.Host()
	if err != nil {
		return fmt.Errorf("kubelet: reading the host: %w", err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Labels: n.labels(h)},
		Spec: corev1.NodeSpec{Taints: n.cfg.Taints}}
	node, err := n.cs.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if node, err = n.cs.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{}); err == nil {
			node, err = n.adopt(ctx, node, want.Labels)
		}
	}
	if err != nil {
		return fmt.Errorf("kubelet: registering node %s: %w", n.cfg.Name, err)
	}
	n.node = node
	n.log.Info("node registered", "uid", node.UID)
	if err := n.postStatus(ctx, h, true); err != nil {
		return err
	}
	return n.renewLease(ctx)
}

// adopt adds the labels the existing Node lacks (a user's later changes to them are kept).
func (n *Node) adopt(ctx context.Context, node *corev1.Node, labels map[string]string) (*corev1.Node, error) {
	missing := false
	for k := range labels {
		if _, ok := node.Labels[k]; !ok {
			missing = true
		}
	}
	if !missing {
		return node, nil
	}
	next := node.DeepCopy()
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	for k, v := range labels {
		if _, ok := next.Labels[k]; !ok {
			next.Labels[k] = v
		}
	}
	return n.cs.CoreV1().Nodes().Update(ctx, next, metav1.UpdateOptions{})
}

func (n *Node) labels(h Host) map[string]string {
	l := map[string]string{
		corev1.LabelHostname: n.cfg.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: h.Arch,
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": h.Arch,
	}
	maps.Copy(l, n.cfg.Labels)
	return l
}

// Run renews the Lease and keeps the status current until ctx ends. Failures are logged and retried at the
// next tick: the node lifecycle controller, not this loop, decides what a silent node means.
func (n *Node) Run(ctx context.Context) {
	lease := n.cfg.Clock.NewTicker(n.cfg.RenewInterval)
	defer lease.Stop()
	status := n.cfg.Clock.NewTicker(n.cfg.StatusInterval)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C():
			if err := n.renewLease(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("renewing the node lease failed", "err", err)
			}
		case <-status.C():
			h, err := n.cfg.Host()
			if err == nil {
				err = n.postStatus(ctx, h, false)
			}
			if err != nil && ctx.Err() == nil {
				n.log.Warn("posting the node status failed", "err", err)
			}
		}
	}
}

// postStatus posts the status computed from h when it differs from the Node's in the API (heartbeats aside) or
// the report interval has passed, or always with force. It compares with the API's, as upstream's kubelet,
// not with what it posted last: the node lifecycle controller may have set Ready to Unknown meanwhile (the
// server was unreachable), and only this post makes the node Ready again.
func (n *Node) postStatus(ctx context.Context, h Host, force bool) error {
	now := n.cfg.Clock.Now()
	if !force {
		// As upstream's kubelet: the first read may come from the server's cache (resourceVersion 0); a
		// conflict then reads the store.
		cur, err := n.cs.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return fmt.Errorf("kubelet: node status: %w", err)
		}
		n.node = cur
	}
	for attempt := 0; ; attempt++ {
		next := n.node.DeepCopy()
		n.setStatus(&next.Status, h, now)
		if !force && now.Sub(n.reported) < n.cfg.ReportInterval && sameStatus(n.node.Status, next.Status) {
			return nil
		}
		out, err := n.cs.CoreV1().Nodes().UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err == nil {
			n.node, n.reported = out, now
			n.readyEvent(condition(out, corev1.NodeReady).Status)
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 3 {
			return fmt.Errorf("kubelet: node status: %w", err)
		}
		if n.node, err = n.cs.CoreV1().Nodes().Get(ctx, n.cfg.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("kubelet: node status: %w", err)
		}
	}
}

// readyEvent records NodeReady or NodeNotReady when the Ready status this kubelet posted changed.
func (n *Node) readyEvent(ready corev1.ConditionStatus) {
	if ready == n.lastReady {
		return
	}
	n.lastReady = ready
	if n.cfg.Recorder == nil {
		return
	}
	reason := "NodeNotReady"
	if ready == corev1.ConditionTrue {
		reason = "NodeReady"
	}
	ref := &corev1.ObjectReference{Kind: "Node", Name: n.cfg.Name, UID: types.UID(n.cfg.Name)}
	n.cfg.Recorder.Eventf(ref, corev1.EventTypeNormal, reason, "Node %s status is now: %s", n.cfg.Name, reason)
}

// condition is the node's condition of type t (zero when it has none).
func condition(node *corev1.Node, t corev1.NodeConditionType) corev1.NodeCondition {
	for _, c := range node.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// sameStatus compares statuses without the conditions' heartbeat times.
func sameStatus(a, b corev1.NodeStatus) bool {
	strip := func(s corev1.NodeStatus) corev1.NodeStatus {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return s
	}
	return apiequality.Semantic.DeepEqual(strip(a), strip(b))
}

// Eviction thresholds as kubelet's hard defaults: memory.available < 100Mi, nodefs.available < 10%; PIDs in use
// above 90 % of pid_max.
const memoryAvailableMin = 100 << 20

func (n *Node) setStatus(st *corev1.NodeStatus, h Host, now time.Time) {
	capacity, allocatable := h.capacity(n.cfg.MaxPods), h.capacity(n.cfg.MaxPods)
	// Resources someone else advertised (extended resources in a status patch, as the scheduler's tests make,
	// or an operator's) stay, as upstream's kubelet keeps the capacity it does not manage: allocatable as capacity.
	for name, q := range st.Capacity {
		if _, managed := capacity[name]; !managed {
			capacity[name], allocatable[name] = q.DeepCopy(), q.DeepCopy()
		}
	}
	st.Capacity, st.Allocatable = capacity, allocatable
	st.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: h.InternalIP}, {Type: corev1.NodeHostName, Address: h.Hostname}}
	st.NodeInfo = corev1.NodeSystemInfo{MachineID: h.MachineID, SystemUUID: h.MachineID, BootID: h.BootID,
		KernelVersion: h.KernelVersion, OSImage: h.OSImage, ContainerRuntimeVersion: n.cfg.RuntimeVersion,
		KubeletVersion: n.cfg.KubeletVersion, OperatingSystem: "linux", Architecture: h.Arch}
	hb := metav1.NewTime(now)
	set := func(t corev1.NodeConditionType, on bool, onReason, onMsg, offReason, offMsg string) {
		c := corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: offReason, Message: offMsg, LastHeartbeatTime: hb, LastTransitionTime: hb}
		if on {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, onReason, onMsg
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == t {
				if st.Conditions[i].Status == c.Status {
					c.LastTransitionTime = st.Conditions[i].LastTransitionTime
				}
				st.Conditions[i] = c
				return
			}
		}
		st.Conditions = append(st.Conditions, c)
	}
	set(corev1.NodeMemoryPressure, h.MemoryAvailableBytes > 0 && h.MemoryAvailableBytes < memoryAvailableMin,
		"KubeletHasInsufficientMemory", "kubelet has insufficient memory available", "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
	set(corev1.NodeDiskPressure, h.DiskBytes > 0 && h.DiskAvailableBytes*10 < h.DiskBytes,
		"KubeletHasDiskPressure", "kubelet has disk pressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	set(corev1.NodePIDPressure, h.PIDMax > 0 && h.PIDs*10 > h.PIDMax*9,
		"KubeletHasInsufficientPID", "kubelet has insufficient PID available", "KubeletHasSufficientPID", "kubelet has sufficient PID available")
	err := n.cfg.Healthy()
	msg := "kubelet is posting ready status"
	if err != nil {
		msg = err.Error()
	}
	set(corev1.NodeReady, err == nil, "KubeletReady", msg, "KubeletNotReady", msg)
}

// renewLease renews the node's Lease in kube-node-lease, creating it (owned by the Node, so it goes with it)
// when missing. As upstream's lease controller it writes over the Lease it last wrote, without reading it
// first: a renewal is one PUT, and only a failed one (a conflict: someone else wrote the Lease; or anything
// else) makes the next renewal read the Lease again.
func (n *Node) renewLease(ctx context.Context) error {
	leases := n.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(n.cfg.Clock.Now())
	if n.lease == nil {
		lease, err := leases.Get(ctx, n.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			secs := int32(n.cfg.LeaseDuration / time.Second)
			n.lease, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: n.cfg.Name, Namespace: corev1.NamespaceNodeLease,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.node.Name, UID: n.node.UID}}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &n.cfg.Name, LeaseDurationSeconds: &secs, RenewTime: &now}},
				metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		n.lease = lease
	}
	next := n.lease.DeepCopy()
	next.Spec.RenewTime = &now
	out, err := leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		n.lease = nil
		return err
	}
	n.lease = out
	return nil
}
