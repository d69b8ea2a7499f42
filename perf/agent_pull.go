package perf

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/registrytest"
)

// The pulled images' shape: issue 22's ≈ 50 MiB in several layers, on top of the podserver image (which the
// node has before anything is timed, so that only these layers move).
const (
	pullLayers     = 5
	pullLayerBytes = 10 << 20
)

// AgentPulls is issue 22's pull-and-start measurement: pods whose image is not on the node, pulled by the agent
// through containerd's CRI from a local registry, one at a time, each after a `ctr images pull` of another
// image of the same shape from the same registry into the same containerd (the floor).
type AgentPulls struct {
	Pods int
	// Layers layers of LayerBytes random (incompressible) bytes each make an image; ImageBytes is what one pull
	// moves (those layers as pushed, gzip), BaseBytes the podserver layers beneath them, present on the node.
	Layers                int
	LayerBytes            int64
	ImageBytes, BaseBytes int64
	// ContainerdVersion is what the agent's node reports.
	ContainerdVersion string `json:",omitempty"`
	// Prepare is how long starting the registry and building and pushing the images took, before anything is
	// timed.
	Prepare time.Duration
	Samples []AgentPullSample
	// Err is a set-up failure: nothing, or only the samples before it, measured.
	Err string `json:",omitempty"`
}

// AgentPullSample is one pair: a `ctr images pull`, then a pod through the agent, each of an image of its own.
type AgentPullSample struct {
	I int
	// Ctr is how long `ctr images pull` (fetch and unpack) took, CtrCores the machine's busy cores meanwhile.
	Ctr      time.Duration
	CtrCores float64
	CtrErr   string `json:",omitempty"`
	// Pull and PullTotal are the agent's Pulled event's "in X (Y including waiting)"; PulledSize its image size.
	Pull, PullTotal time.Duration
	PulledSize      int64
	// CRIPull is how long containerd took to answer the agent's PullImage, from its log (0: not found).
	CRIPull time.Duration
	// Running is from the start of the pod's create call until an informer shows it Running; BeforePull from
	// that start until containerd's log shows the PullImage call (the agent runs the sandbox first, as kubelet
	// does); AfterPull from the end of the pull (containerd's PullImage answer in its log, else the Pulled
	// event's arrival) until Running.
	Running, BeforePull, AfterPull time.Duration
	// AgentCores is the machine's busy cores from the create until Running.
	AgentCores float64
	Err        string `json:",omitempty"`
}

// pullTarget is the pull measurement's set-up: the registry, its images and the agent's containerd.
type pullTarget struct {
	t        *runtimeTarget
	reg      *registrytest.Registry
	hostsDir string // the containerd hosts directories the agent renders from its registries.yaml
	base     string // the podserver image in the registry
	// agentRefs and ctrRefs are the measured images, one per sample each.
	agentRefs, ctrRefs []string
}

// pulls measures Pulls pods whose image is absent on a containerd agent of its own (in the network namespace
// after the others'), each after a `ctr images pull` of an image of the same shape, one at a time. The agent
// trusts the registry through --registries (a registries.yaml with the registry's CA), which it renders into
// the hosts directories containerd reads (its config_path); ctr reads the same directories.
func (r *agentRunner) pulls(ctx context.Context) *AgentPulls {
	out := &AgentPulls{Pods: r.cfg.Pulls, Layers: pullLayers, LayerBytes: pullLayerBytes}
	t0 := time.Now()
	pt, err := r.preparePulls(ctx, out)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	defer pt.reg.Stop()
	defer r.closeContainerd(pt.t)
	defer r.stopRealAgents() // before containerd is closed
	agents, err := r.startAgents(ctx, []realAgent{pt.t.spec})
	if err != nil {
		out.Err = err.Error()
		return out
	}
	pt.t.agent = agents[0]
	if n, err := r.srv.cs.CoreV1().Nodes().Get(ctx, pt.t.spec.node, metav1.GetOptions{}); err == nil {
		out.ContainerdVersion = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	// The base image's layers come from the registry once, untimed: the import stored them uncompressed.
	if _, err := ctrPull(ctx, pt.t, pt.hostsDir, pt.base); err != nil {
		out.Err = fmt.Errorf("pulling the base image with ctr (untimed): %w", err).Error()
		return out
	}
	out.Prepare = time.Since(t0)
	r.log.Info("pull and start", "pods", out.Pods, "image", fmtBytes(float64(out.ImageBytes)), "prepared in", out.Prepare)
	if err := r.pullSamples(ctx, pt, out); err != nil {
		out.Err = withErr(out.Err, err)
	}
	return out
}

// preparePulls starts the registry on the host's side of the bridge, pushes the base image and two images per
// sample, and starts the agent's containerd with the agent's hosts directory as its config_path.
func (r *agentRunner) preparePulls(ctx context.Context, out *AgentPulls) (*pullTarget, error) {
	i := r.cfg.RealAgents
	if r.cfg.RuntimePods > 0 {
		i += 3
	}
	node := "perf-pull"
	dataDir := filepath.Join(r.dir, node)
	pt := &pullTarget{t: &runtimeTarget{name: runtimeContainerd, spec: realAgent{node: node, netns: perfNetns(i), pod: pinned(imagePod)}},
		hostsDir: filepath.Join(dataDir, "registries.d")}
	regDir := filepath.Join(r.dir, "registry")
	if err := os.MkdirAll(regDir, 0o700); err != nil {
		return nil, err
	}
	reg, err := registrytest.StartProcess(registrytest.Options{IP: perfHostIP}, regDir)
	if err != nil {
		return nil, err
	}
	pt.reg = reg
	r.defer_(reg.Stop)
	if err := r.pushPullImages(ctx, pt, out); err != nil {
		return nil, err
	}
	registries := filepath.Join(r.dir, "registries.yaml")
	yaml := "configs:\n  " + strconv.Quote(reg.Host) + ":\n    tls:\n      ca_file: " + strconv.Quote(reg.CAFile) + "\n"
	if err := os.WriteFile(registries, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	pt.t.spec.args = []string{"--registries", registries}
	if _, err := r.startContainerd(ctx, pt.t, pt.hostsDir); err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	return pt, nil
}

// pushPullImages pushes the podserver image as the base, and per sample one image for the agent's pod and
// one for ctr: the base with pullLayers layers of their own (a distinct seed each), so that no two pulls share
// anything but the base.
func (r *agentRunner) pushPullImages(ctx context.Context, pt *pullTarget, out *AgentPulls) error {
	srv, err := containerdtest.BuildServer(ctx)
	if err != nil {
		return err
	}
	base, err := registrytest.FromArchive(srv.Tar, containerdtest.ServerImage)
	if err != nil {
		return err
	}
	if out.BaseBytes, err = layerBytes(base); err != nil {
		return err
	}
	if _, err := pt.reg.PushImage(ctx, "agentperf/base:1", base); err != nil {
		return err
	}
	pt.base = pt.reg.Ref("agentperf/base:1")
	r.log.Info("pushing the images to pull", "images", 2*r.cfg.Pulls, "registry", pt.reg.Host)
	for i := range r.cfg.Pulls {
		for _, side := range []struct {
			repo string
			seed uint64
			refs *[]string
		}{{"agentperf/pod-", uint64(2*i + 1), &pt.agentRefs}, {"agentperf/ctr-", uint64(2*i + 2), &pt.ctrRefs}} {
			img, err := registrytest.WithFiller(base, pullLayers, pullLayerBytes, side.seed)
			if err != nil {
				return err
			}
			repoTag := fmt.Sprintf("%s%02d:1", side.repo, i)
			if _, err := pt.reg.PushImage(ctx, repoTag, img); err != nil {
				return err
			}
			*side.refs = append(*side.refs, pt.reg.Ref(repoTag))
			if i == 0 {
				all, err := layerBytes(img)
				if err != nil {
					return err
				}
				out.ImageBytes = all - out.BaseBytes
			}
		}
	}
	return nil
}

// layerBytes is the size of img's layers as its manifest lists them (compressed).
func layerBytes(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

// pullSamples runs the samples: for each, a ctr pull, then a pod through the agent (deleted, and its sandbox
// gone, before the next sample). Afterwards containerd's log gives the CRI PullImage of each pod.
func (r *agentRunner) pullSamples(ctx context.Context, pt *pullTarget, out *AgentPulls) error {
	cs, ns := r.srv.cs, pullNamespace
	pods, err := timedNamespace(ctx, cs, ns)
	if err != nil {
		return err
	}
	defer pods.Stop()
	events, err := newPullEvents(ctx, cs, ns)
	if err != nil {
		return err
	}
	defer events.Stop()
	from := time.Now()
	var times []podTimes
	for i := range r.cfg.Pulls {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s, tm := r.pullSample(ctx, pt, pods, events, i)
		r.log.Info("pull and start", "i", i, "ctr", s.Ctr, "agent-pull", s.Pull, "running", s.Running, "ctr-err", s.CtrErr, "err", s.Err)
		out.Samples, times = append(out.Samples, s), append(times, tm)
		if err := deleteAll(ctx, cs, ns, pods, r.cfg.Timeout); err != nil {
			return err
		}
		if err := r.sandboxesGone(ctx, pt.t); err != nil {
			return err
		}
	}
	fromLog(out.Samples, times, pt.agentRefs, pullImageCalls(pt.t.ctd.Log, from, time.Now()))
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return nil
}

// pullNamespace holds the sample pods.
const pullNamespace = "pulls"

// podTimes are when the harness started a sample pod's create call, saw it Running and saw its Pulled event.
type podTimes struct{ created, running, pulledSeen time.Time }

// pullSample times sample i: ctr's pull, then the agent's pod. Each starts after sync(2), so that the previous
// one's writeback of the layers it wrote does not fall into it.
func (r *agentRunner) pullSample(ctx context.Context, pt *pullTarget, pods *podTimer, events *pullEvents, i int) (AgentPullSample, podTimes) {
	s := AgentPullSample{I: i}
	syscall.Sync()
	cpu0, c0 := readCPUStat(), time.Now()
	var err error
	if s.Ctr, err = ctrPull(ctx, pt.t, pt.hostsDir, pt.ctrRefs[i]); err != nil {
		s.Ctr, s.CtrErr = 0, err.Error()
	} else {
		s.CtrCores = busyCores(cpu0, readCPUStat(), time.Since(c0))
	}
	syscall.Sync()
	name := fmt.Sprintf("pull-%02d", i)
	cpu0 = readCPUStat()
	starts, err := startPods(ctx, r.srv.cs, pullNamespace, pods, 1, 1, r.cfg.Timeout, func(int) *corev1.Pod {
		return pullPod(name, pt.t.spec.node, pt.agentRefs[i])
	})
	pods.mu.Lock()
	tm := podTimes{created: starts[name], running: pods.running[name]}
	pods.mu.Unlock()
	if err != nil {
		s.Err = err.Error()
	} else {
		s.Running = tm.running.Sub(tm.created)
		s.AgentCores = busyCores(cpu0, readCPUStat(), s.Running)
	}
	msg, seen, err := events.waitPulled(ctx, name, 10*time.Second)
	if err == nil {
		s.Pull, s.PullTotal, s.PulledSize, err = parsePulled(msg)
	}
	if err != nil {
		s.Err = withErr(s.Err, err)
	}
	tm.pulledSeen = seen
	return s, tm
}

// fromLog sets each sample's containerd PullImage time and the times before and after the pull from calls
// (containerd's log, by image: refs[i] is sample i's); without its call, the pull's end is when the harness saw
// the Pulled event.
func fromLog(samples []AgentPullSample, times []podTimes, refs []string, calls map[string]criPull) {
	for i := range samples {
		s, tm := &samples[i], times[i]
		end := tm.pulledSeen
		if c, ok := calls[refs[i]]; ok {
			s.CRIPull, end = c.took, c.end
			if !tm.created.IsZero() {
				s.BeforePull = c.end.Add(-c.took).Sub(tm.created)
			}
		}
		if !tm.running.IsZero() && !end.IsZero() {
			s.AfterPull = tm.running.Sub(end)
		}
	}
}

// busyCores is how many of the machine's cores were busy on average between two readings took apart.
func busyCores(a, b cpuStat, took time.Duration) float64 {
	if took <= 0 {
		return 0
	}
	return float64(b.busy-a.busy) / clockTick / took.Seconds()
}

// pullPod is a pod pinned to node running the podserver from image, which the node does not have: the agent
// pulls it (IfNotPresent).
func pullPod(name, node, image string) *corev1.Pod {
	p := pinned(imagePod)(name, node)
	p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = image, corev1.PullIfNotPresent
	return p
}

// ctrPull runs `ctr images pull` of ref into t's containerd, in the CRI plugin's namespace (k8s.io) with its
// default snapshotter, from t's network namespace (as the agent's containerd reaches the registry) with the
// hosts directories at hostsDir, and returns how long the command took.
func ctrPull(ctx context.Context, t *runtimeTarget, hostsDir, ref string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+t.spec.netns, "--", "ctr", "--address", t.ctd.Socket,
		"-n", containerdtest.Namespace, "images", "pull", "--hosts-dir", hostsDir, ref)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		b := buf.Bytes()
		return took, fmt.Errorf("ctr images pull %s: %w: %s", ref, err, bytes.TrimSpace(b[max(0, len(b)-1000):]))
	}
	return took, nil
}
