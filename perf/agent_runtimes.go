package perf

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/containerdtest"
)

// The runtimes compared, by the name the report gives them.
const (
	runtimeProcess    = "process"
	runtimeContainerd = "containerd"
	// runtimeUnlimited is containerd with every pod starting at once (--max-parallel-pod-starts -1): what the
	// agent's start limit changes. Names are part of namespaces' names.
	runtimeUnlimited = "containerd-nolimit"
)

// containerdStartupGoal is issue 9's goal: pod startup p99 with containerd, images already present.
const containerdStartupGoal = 2 * time.Second

// runtimeTarget is one runtime's real agent in the comparison.
type runtimeTarget struct {
	name  string
	spec  realAgent
	agent *child
	// ctd is the containerd the agent talks to (nil for the process runtime); closeOnce closes it.
	ctd       *containerdtest.Containerd
	closeOnce sync.Once
}

// runtimes compares the process runtime with containerd: one new agent per runtime, each in a network namespace
// of its own (the two after the startup agents'), and per repetition RuntimePods pods pinned to each agent in
// turn. containerd runs in its agent's namespace with the pause and podserver images imported first. The
// startup agents must be stopped already (their pods would share the machine's CPU). Everything it starts is
// stopped before it returns, and by the run's cleanup if it does not get that far.
func (r *agentRunner) runtimes(ctx context.Context) *AgentRuntimes {
	out := &AgentRuntimes{Pods: r.cfg.RuntimePods}
	i := r.cfg.RealAgents
	proc := &runtimeTarget{name: runtimeProcess, spec: realAgent{node: "perf-process", netns: perfNetns(i), pod: pinned(sleepPod)}}
	ctd := &runtimeTarget{name: runtimeContainerd, spec: realAgent{node: "perf-containerd", netns: perfNetns(i + 1), pod: pinned(imagePod)}}
	free := &runtimeTarget{name: runtimeUnlimited, spec: realAgent{node: "perf-containerd-free", netns: perfNetns(i + 2), pod: pinned(imagePod)}}
	targets := []*runtimeTarget{proc}
	for _, t := range []*runtimeTarget{ctd, free} {
		if err := r.launchContainerd(ctx, t, out); err != nil {
			out.Err = withErr(out.Err, fmt.Errorf("%s not measured: %w", t.name, err))
			r.log.Error("containerd could not be started", "runtime", t.name, "err", err)
			continue
		}
		targets = append(targets, t)
		defer r.closeContainerd(t)
	}
	free.spec.args = append(free.spec.args, "--max-parallel-pod-starts", "-1")
	specs := make([]realAgent, len(targets))
	for k, t := range targets {
		specs[k] = t.spec
	}
	r.log.Info("starting one agent per runtime", "runtimes", len(targets))
	defer r.stopRealAgents() // before containerd is closed
	agents, err := r.startAgents(ctx, specs)
	if err != nil {
		out.Err = withErr(out.Err, err)
		return out
	}
	for k, t := range targets {
		t.agent = agents[k]
	}
	if n, err := r.srv.cs.CoreV1().Nodes().Get(ctx, ctd.spec.node, metav1.GetOptions{}); err == nil {
		out.ContainerdVersion = n.Status.NodeInfo.ContainerRuntimeVersion
	}
	for rep := 1; rep <= r.cfg.Repetitions && ctx.Err() == nil; rep++ {
		for _, t := range targets {
			res := r.runtimeRep(ctx, t, rep)
			r.log.Info("runtime startup", "runtime", t.name, "rep", rep, "running", res.Running, "p50", res.P50, "p99", res.P99,
				"agent-cpu", fmt.Sprintf("%.2fs", res.AgentCPU), "err", res.Err)
			out.Reps = append(out.Reps, res)
		}
	}
	return out
}

// withErr adds err to the error message msg ("": none).
func withErr(msg string, err error) string {
	if msg == "" {
		return err.Error()
	}
	return msg + "\n" + err.Error()
}

// pinned is mk's pod with a node selector on node's hostname label: the scheduler binds it there.
func pinned(mk func(name, node string) *corev1.Pod) func(name, node string) *corev1.Pod {
	return func(name, node string) *corev1.Pod {
		p := mk(name, "")
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		return p
	}
}

// imagePod is sleepPod's shape from an image: containerdtest's podserver (imported on the node: pull policy
// Never) serving HTTP, as the agent's containerd e2e test runs it.
func imagePod(name, node string) *corev1.Pod {
	p := sleepPod(name, node)
	c := &p.Spec.Containers[0]
	c.Image, c.ImagePullPolicy, c.Command = containerdtest.ServerImage, corev1.PullNever, []string{"/podserver", "serve"}
	return p
}

// launchContainerd starts containerd for t (startContainerd) and notes how long its images took.
func (r *agentRunner) launchContainerd(ctx context.Context, t *runtimeTarget, out *AgentRuntimes) error {
	took, err := r.startContainerd(ctx, t, "")
	if err != nil {
		return err
	}
	out.Images = took
	return nil
}

// startContainerd starts containerd in t's network namespace with its CNI configuration directory (which the
// agent writes) and registryConfigPath as the CRI plugin's registry config_path ("": none), imports the pause
// and podserver images and gives t the agent flags that use it; it returns how long building (or finding in
// the cache) and importing the images took. The run's cleanup closes it.
func (r *agentRunner) startContainerd(ctx context.Context, t *runtimeTarget, registryConfigPath string) (time.Duration, error) {
	dir := filepath.Join(r.dir, t.spec.node)
	cniDir := filepath.Join(dir, "cni-conf")
	c, err := containerdtest.Launch(ctx, containerdtest.Options{Dir: filepath.Join(dir, "containerd"),
		NetNS: "/run/netns/" + t.spec.netns, CNIConfDir: cniDir, RegistryConfigPath: registryConfigPath,
		Logger: r.log.With("component", "containerd")})
	if err != nil {
		return 0, err
	}
	t.ctd = c
	r.defer_(func() { r.closeContainerd(t) })
	t0 := time.Now()
	var images []containerdtest.Image
	for _, build := range []func(context.Context) (containerdtest.Image, error){containerdtest.BuildPause, containerdtest.BuildServer} {
		img, err := build(ctx)
		if err != nil {
			return 0, err
		}
		images = append(images, img)
	}
	if err := c.Import(ctx, images...); err != nil {
		return 0, err
	}
	t.spec.args = append(t.spec.args, "--runtime", "containerd", "--containerd-endpoint", c.Socket, "--cni-conf-dir", cniDir)
	return time.Since(t0), nil
}

// closeContainerd removes the pod sandboxes left in t's containerd through the agent's CRI runtime, which also
// removes their pods' cgroups (containerd leaves those to its caller), then closes containerd. Once; run after
// the agent stopped.
func (r *agentRunner) closeContainerd(t *runtimeTarget) {
	t.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := removeSandboxes(ctx, t.ctd.Socket); err != nil {
			r.log.Warn("containerd's sandboxes", "err", err)
		}
		if err := t.ctd.Close(); err != nil {
			r.log.Error("containerd's cleanup", "err", err)
			r.res.Errors = append(r.res.Errors, err.Error())
		}
	})
}

// removeSandboxes stops and removes every pod sandbox of the runtime at socket, as the agent does.
func removeSandboxes(ctx context.Context, socket string) error {
	openCtx, cancel := context.WithTimeout(ctx, 5*time.Second) // Open waits for a runtime that is down
	defer cancel()
	rt, err := cri.Open(openCtx, cri.Config{Endpoint: socket, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer rt.Close()
	sbs, err := rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, sb := range sbs {
		errs = append(errs, ignoreNotFound(rt.StopPodSandbox(ctx, sb.Id)), ignoreNotFound(rt.RemovePodSandbox(ctx, sb.Id)))
	}
	return errors.Join(errs...)
}

// ignoreNotFound is err unless it says that the sandbox is gone already (the agent's last removals, cancelled
// on its side when it stopped, still complete in containerd).
func ignoreNotFound(err error) error {
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// runtimeRep measures one repetition on t's agent in a fresh namespace: one pod alone, then RuntimePods pods
// created at CreateRate, each timed from its create call to Running (as startupRep does) while the CPU and
// memory of the runtime's processes are read; then it deletes them and waits until the runtime has removed
// their sandboxes, so that the next repetition starts on an idle node.
func (r *agentRunner) runtimeRep(ctx context.Context, t *runtimeTarget, rep int) AgentRuntimeRep {
	out := AgentRuntimeRep{Runtime: t.name, Rep: rep, Pods: r.cfg.RuntimePods}
	fail := func(err error) AgentRuntimeRep {
		out.Err = withErr(out.Err, err)
		return out
	}
	cs, ns := r.srv.cs, fmt.Sprintf("rt-%s-%d", t.name, rep)
	pt, err := timedNamespace(ctx, cs, ns)
	if err != nil {
		return fail(err)
	}
	defer pt.Stop()
	settle(ctx)
	if err := r.lonePod(ctx, t, ns, pt, &out); err != nil {
		return fail(err)
	}
	settle(ctx)
	r.burst(ctx, t, ns, pt, &out)
	t1 := time.Now()
	if err := deleteAll(ctx, cs, ns, pt, r.cfg.Timeout); err != nil {
		return fail(err)
	}
	out.Delete = time.Since(t1)
	if err := r.sandboxesGone(ctx, t); err != nil {
		return fail(err)
	}
	if t.ctd != nil {
		out.SandboxesGone = time.Since(t1)
	}
	_ = cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	return out
}

// lonePod times one pod on the idle node (the latency without a queue, and for containerd its CRI calls), then
// deletes it and waits until its sandbox is gone.
func (r *agentRunner) lonePod(ctx context.Context, t *runtimeTarget, ns string, pt *podTimer, out *AgentRuntimeRep) error {
	t0 := time.Now()
	starts, err := startPods(ctx, r.srv.cs, ns, pt, 1, 1, r.cfg.Timeout, func(int) *corev1.Pod { return t.spec.pod("lone", t.spec.node) })
	if err != nil {
		return fmt.Errorf("one pod alone: %w", err)
	}
	pt.mu.Lock()
	out.Lone = percentile(latencies(starts, pt.running), 100)
	pt.mu.Unlock()
	if t.ctd != nil {
		out.LoneCRI = criCalls(t.ctd.Log, t0, time.Now())
	}
	if err := deleteAll(ctx, r.srv.cs, ns, pt, r.cfg.Timeout); err != nil {
		return err
	}
	return r.sandboxesGone(ctx, t)
}

// burst creates RuntimePods pods at CreateRate and times them, reading the runtime's CPU and memory meanwhile.
func (r *agentRunner) burst(ctx context.Context, t *runtimeTarget, ns string, pt *podTimer, out *AgentRuntimeRep) {
	probe := r.probe(t)
	before, cpu0 := probe.sample(), readCPUStat()
	out.AgentIdleRSS, _ = rssBytes(probe.agent)
	stopPeaks := peakRSS(probe.agent, probe.containerd)
	t0 := time.Now()
	starts, err := startPods(ctx, r.srv.cs, ns, pt, r.cfg.RuntimePods, r.cfg.CreateRate, r.cfg.Timeout, func(i int) *corev1.Pod {
		return t.spec.pod(fmt.Sprintf("p-%04d", i), t.spec.node)
	})
	out.Window = time.Since(t0)
	out.usage(before, probe.sample())
	cpu1 := readCPUStat()
	out.MachineCores = float64(cpu1.busy-cpu0.busy) / clockTick / out.Window.Seconds()
	out.MachineSteal = float64(cpu1.steal-cpu0.steal) / clockTick / out.Window.Seconds()
	peaks := stopPeaks()
	out.AgentPeakRSS, out.ContainerdPeakRSS = peaks[0], peaks[1]
	for _, pid := range probe.shims() {
		out.Shims++
		if n, err := pssBytes(pid); err == nil {
			out.ShimsPSS += n
		}
	}
	if t.ctd != nil {
		out.CRI = criCalls(t.ctd.Log, t0, time.Now())
	}
	pt.mu.Lock()
	run, bind := latencies(starts, pt.running), latencies(starts, pt.bound)
	r.log.Info("slowest pods", "runtime", t.name, "rep", out.Rep, "pods", slowest(starts, pt.running, 3))
	pt.mu.Unlock()
	out.Running = len(run)
	out.P50, out.P99, out.Max = percentile(run, 50), percentile(run, 99), percentile(run, 100)
	out.BindP50, out.BindP99 = percentile(bind, 50), percentile(bind, 99)
	if err != nil {
		out.Err = err.Error()
	}
}

// startPods creates n pods from mk at rate per second (open loop) and waits until the timer has seen each of
// them Running; it returns when each create call started.
func startPods(ctx context.Context, cs kubernetes.Interface, ns string, pt *podTimer, n, rate int, timeout time.Duration,
	mk func(i int) *corev1.Pod) (map[string]time.Time, error) {
	starts, errs := createAtRate(ctx, cs, ns, n, rate, mk)
	werr := waitFor(ctx, timeout, "every pod Running", func() bool {
		pt.mu.Lock()
		defer pt.mu.Unlock()
		for name := range starts {
			if _, ok := pt.running[name]; !ok {
				return false
			}
		}
		return true
	})
	return starts, errors.Join(append(errs, werr)...)
}

// sandboxesGone waits until t's runtime holds no pod sandbox: the agent removes them after their pods are gone
// from the API, and that work would otherwise overlap the next measurement. The process runtime's sandboxes
// hold no process, and are not waited for.
func (r *agentRunner) sandboxesGone(ctx context.Context, t *runtimeTarget) error {
	if t.ctd == nil {
		return nil
	}
	left := -1
	err := waitFor(ctx, r.cfg.Timeout, "containerd's sandboxes removed", func() bool {
		list, err := t.ctd.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err == nil {
			left = len(list.Items)
		}
		return left == 0
	})
	if err != nil {
		return fmt.Errorf("%w (%d left)", err, left)
	}
	return nil
}

// runtimeProbe reads the CPU time of one runtime's processes: its agent, containerd (pid 0 for the process
// runtime) and the shims, each with its children (the containers).
type runtimeProbe struct {
	agent, containerd int
	shims             func() []int
}

func (r *agentRunner) probe(t *runtimeTarget) runtimeProbe {
	if t.ctd == nil {
		return runtimeProbe{agent: t.agent.pid(), shims: func() []int { return shimPIDs(r.bin) }}
	}
	return runtimeProbe{agent: t.agent.pid(), containerd: t.ctd.PID(), shims: t.ctd.Shims}
}

// runtimeSample is the CPU time a runtime's processes have used so far.
type runtimeSample struct {
	agent, containerd time.Duration
	shims             map[int]time.Duration // by shim
}

// sample reads the agent's own CPU time; containerd's with that of the processes it ran and waited for (the CNI
// plugins, the shims' start commands); each shim's with that of the processes it waited for (runc) and of its
// live children (the containers, whose first instructions are runc's or the process runtime's init).
func (p runtimeProbe) sample() runtimeSample {
	s := runtimeSample{agent: cpuTime(p.agent, false), shims: map[int]time.Duration{}}
	if p.containerd > 0 {
		s.containerd = cpuTime(p.containerd, true)
	}
	children := childrenByParent()
	for _, pid := range p.shims() {
		t := cpuTime(pid, true)
		for _, c := range children[pid] {
			t += cpuTime(c, false)
		}
		s.shims[pid] = t
	}
	return s
}

// usage sets the CPU seconds used between two samples; shims that were gone by the second are not counted.
func (out *AgentRuntimeRep) usage(before, after runtimeSample) {
	out.AgentCPU = (after.agent - before.agent).Seconds()
	out.ContainerdCPU = (after.containerd - before.containerd).Seconds()
	for pid, t := range after.shims {
		out.ShimsCPU += (t - before.shims[pid]).Seconds()
	}
}

// peakRSS samples the RSS of each of pids (0: none) every 100 ms until the returned function is called, which
// returns each one's highest.
func peakRSS(pids ...int) func() []int64 {
	peaks := make([]int64, len(pids))
	done, stopped := make(chan struct{}), make(chan struct{})
	read := func() {
		for i, pid := range pids {
			if pid <= 0 {
				continue
			}
			if n, err := rssBytes(pid); err == nil {
				peaks[i] = max(peaks[i], n)
			}
		}
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() []int64 {
		close(done)
		<-stopped
		read()
		return peaks
	}
}

// cpuStat is the machine's CPU time so far, in ticks, from /proc/stat's first line: busy (user, nice, system,
// irq, softirq) and steal (time the hypervisor gave the virtual CPUs to others).
type cpuStat struct{ busy, steal int64 }

func readCPUStat() cpuStat {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuStat{}
	}
	n := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
	return cpuStat{busy: n(1) + n(2) + n(3) + n(6) + n(7), steal: n(8)}
}

// slowest names the n pods slowest from start to Running, with their latencies, for the progress log.
func slowest(starts, running map[string]time.Time, n int) string {
	type pod struct {
		name string
		took time.Duration
	}
	var pods []pod
	for name, t := range running {
		if s, ok := starts[name]; ok {
			pods = append(pods, pod{name, t.Sub(s)})
		}
	}
	slices.SortFunc(pods, func(a, b pod) int { return cmp.Compare(b.took, a.took) })
	var parts []string
	for _, p := range pods[:min(n, len(pods))] {
		parts = append(parts, p.name+" "+p.took.Round(time.Millisecond).String())
	}
	return strings.Join(parts, ", ")
}
