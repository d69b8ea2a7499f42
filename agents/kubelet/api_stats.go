package kubelet

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsv1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// GET /stats/summary is kubelet's Summary API (what metrics-server scrapes through nodes/proxy): the node's
// CPU, memory and filesystem, and per pod and container the CPU and memory the runtime measures (runtimes
// that measure nothing, like the hollow nodes' fake one, list their containers without usage). CPU usage is
// cumulative core-nanoseconds; the rate (UsageNanoCores) is over the time since the previous summary, so the
// first summary has none, as kubelet's first has none before cAdvisor's second sample.

// usageSampler remembers the previous cumulative CPU reading of the node and of each container.
type usageSampler struct {
	mu   sync.Mutex
	last map[string]cpuSample
}

type cpuSample struct{ at, usage uint64 } // nanoseconds

// rate records usage (core-ns) at time at (unix ns) for key and returns the nano-cores used since the previous
// reading, if there is one.
func (s *usageSampler) rate(key string, at, usage uint64, seen map[string]bool) *uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = map[string]cpuSample{}
	}
	seen[key] = true
	prev, ok := s.last[key]
	s.last[key] = cpuSample{at, usage}
	if !ok || at <= prev.at || usage < prev.usage {
		return nil
	}
	r := (usage - prev.usage) * 1e9 / (at - prev.at)
	return &r
}

// forget drops the readings of keys not seen in the latest summary (containers that are gone).
func (s *usageSampler) forget(seen map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.last {
		if !seen[k] {
			delete(s.last, k)
		}
	}
}

func (a *api) statsSummary(w http.ResponseWriter, r *http.Request) {
	sum, err := a.summary(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(sum)
}

func (a *api) summary(r *http.Request) (*statsv1.Summary, error) {
	ctx := r.Context()
	onlyCPUAndMemory := r.URL.Query().Get("only_cpu_and_memory") == "true"
	now := time.Now()
	seen := map[string]bool{}
	defer a.p.stats.forget(seen)
	node := statsv1.NodeStats{NodeName: a.p.cfg.NodeName, StartTime: metav1.NewTime(bootTime()),
		CPU: a.nodeCPU(now, seen), Memory: nodeMemory(now)}
	if !onlyCPUAndMemory {
		node.Fs = fsStats(a.p.cfg.DataDir, now)
	}
	sandboxes, err := a.rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil {
		return nil, a.runtimeError(ctx, err, "list pod sandboxes")
	}
	containers, err := a.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	if err != nil {
		return nil, a.runtimeError(ctx, err, "list containers")
	}
	usage := map[string]*runtimeapi.ContainerStats{}
	if sp, ok := a.rt.(runtime.StatsProvider); ok {
		stats, err := sp.ListContainerStats(ctx, nil)
		if err != nil {
			return nil, a.runtimeError(ctx, err, "list container stats")
		}
		for _, s := range stats {
			usage[s.GetAttributes().GetId()] = s
		}
	}
	bySandbox := map[string][]*runtimeapi.Container{}
	for _, c := range containers {
		bySandbox[c.PodSandboxId] = append(bySandbox[c.PodSandboxId], c)
	}
	sum := &statsv1.Summary{Node: node, Pods: []statsv1.PodStats{}}
	for _, sb := range sandboxes {
		md := sb.GetMetadata()
		ps := statsv1.PodStats{PodRef: statsv1.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
			StartTime: metav1.NewTime(time.Unix(0, sb.CreatedAt)), Containers: []statsv1.ContainerStats{}}
		var podCPU *statsv1.CPUStats
		var podMem *statsv1.MemoryStats
		for _, c := range bySandbox[sb.Id] {
			cs := statsv1.ContainerStats{Name: c.GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
			if u := usage[c.Id]; u != nil {
				cs.CPU = a.containerCPU(c.Id, u.GetCpu(), seen)
				cs.Memory = containerMemory(u.GetMemory())
				podCPU, podMem = addCPU(podCPU, cs.CPU), addMemory(podMem, cs.Memory)
			}
			ps.Containers = append(ps.Containers, cs)
		}
		ps.CPU, ps.Memory = podCPU, podMem
		sum.Pods = append(sum.Pods, ps)
	}
	return sum, nil
}

func (a *api) containerCPU(id string, u *runtimeapi.CpuUsage, seen map[string]bool) *statsv1.CPUStats {
	if u == nil || u.UsageCoreNanoSeconds == nil {
		return nil
	}
	total := u.UsageCoreNanoSeconds.Value
	return &statsv1.CPUStats{Time: metav1.NewTime(time.Unix(0, u.Timestamp)), UsageCoreNanoSeconds: &total,
		UsageNanoCores: a.p.stats.rate("container/"+id, uint64(u.Timestamp), total, seen)}
}

func containerMemory(m *runtimeapi.MemoryUsage) *statsv1.MemoryStats {
	if m == nil || m.UsageBytes == nil {
		return nil
	}
	out := &statsv1.MemoryStats{Time: metav1.NewTime(time.Unix(0, m.Timestamp))}
	for dst, src := range map[**uint64]*runtimeapi.UInt64Value{&out.UsageBytes: m.UsageBytes,
		&out.WorkingSetBytes: m.WorkingSetBytes, &out.RSSBytes: m.RssBytes} {
		if src != nil {
			v := src.Value
			*dst = &v
		}
	}
	return out
}

// addCPU and addMemory sum containers into their pod's figures.
func addCPU(sum, c *statsv1.CPUStats) *statsv1.CPUStats {
	if c == nil {
		return sum
	}
	if sum == nil {
		sum = &statsv1.CPUStats{Time: c.Time}
	}
	sum.UsageCoreNanoSeconds = addUint(sum.UsageCoreNanoSeconds, c.UsageCoreNanoSeconds)
	sum.UsageNanoCores = addUint(sum.UsageNanoCores, c.UsageNanoCores)
	return sum
}

func addMemory(sum, m *statsv1.MemoryStats) *statsv1.MemoryStats {
	if m == nil {
		return sum
	}
	if sum == nil {
		sum = &statsv1.MemoryStats{Time: m.Time}
	}
	sum.UsageBytes = addUint(sum.UsageBytes, m.UsageBytes)
	sum.WorkingSetBytes = addUint(sum.WorkingSetBytes, m.WorkingSetBytes)
	sum.RSSBytes = addUint(sum.RSSBytes, m.RSSBytes)
	return sum
}

func addUint(a, b *uint64) *uint64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		v := *b
		return &v
	}
	v := *a + *b
	return &v
}

// nodeCPU is the machine's CPU time from /proc/stat (every state but idle and iowait; USER_HZ is 100 on Linux).
func (a *api) nodeCPU(now time.Time, seen map[string]bool) *statsv1.CPUStats {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 9 || fields[0] != "cpu" {
		return nil
	}
	var ticks uint64
	for i, v := range fields[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil
		}
		ticks += n
	}
	total := ticks * uint64(10*time.Millisecond)
	return &statsv1.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: &total,
		UsageNanoCores: a.p.stats.rate("node", uint64(now.UnixNano()), total, seen)}
}

// nodeMemory is the machine's memory from /proc/meminfo: usage is what is not free, the working set what is
// not available (page cache the kernel can reclaim is not counted), RSS the anonymous pages.
func nodeMemory(now time.Time) *statsv1.MemoryStats {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	kb := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err == nil {
			kb[k] = n * 1024
		}
	}
	total, free, avail := kb["MemTotal"], kb["MemFree"], kb["MemAvailable"]
	if total == 0 {
		return nil
	}
	usage, ws, rss := total-min(free, total), total-min(avail, total), kb["AnonPages"]
	return &statsv1.MemoryStats{Time: metav1.NewTime(now), AvailableBytes: &avail, UsageBytes: &usage,
		WorkingSetBytes: &ws, RSSBytes: &rss}
}

// fsStats is the filesystem holding dir.
func fsStats(dir string, now time.Time) *statsv1.FsStats {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	avail, capacity, used := st.Bavail*bs, st.Blocks*bs, (st.Blocks-st.Bfree)*bs
	inodes, inodesFree := st.Files, st.Ffree
	inodesUsed := inodes - min(inodesFree, inodes)
	return &statsv1.FsStats{Time: metav1.NewTime(now), AvailableBytes: &avail, CapacityBytes: &capacity,
		UsedBytes: &used, Inodes: &inodes, InodesFree: &inodesFree, InodesUsed: &inodesUsed}
}

// bootTime is when the machine booted (/proc/stat btime), the node's start time as kubelet reports it.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}
