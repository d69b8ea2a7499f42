package process

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

var _ runtime.StatsProvider = (*Runtime)(nil)

// ListContainerStats reads the running containers' usage from their cgroups: cumulative CPU time (v2
// cpu.stat usage_usec; v1 cpuacct.usage) and memory (usage, working set = usage minus inactive file pages, as
// kubelet computes it, and RSS). A figure the kernel does not offer is left out.
func (r *Runtime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	type running struct {
		attrs  *runtimeapi.ContainerAttributes
		cgroup string
	}
	var todo []running
	r.mu.Lock()
	for _, rec := range r.containers {
		c := rec.config
		if filter != nil && ((filter.Id != "" && filter.Id != rec.ID) ||
			(filter.PodSandboxId != "" && filter.PodSandboxId != rec.SandboxID) ||
			!runtime.MatchLabels(filter.LabelSelector, c.Labels)) {
			continue
		}
		if r.observe(rec).state != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		todo = append(todo, running{attrs: clone(&runtimeapi.ContainerAttributes{Id: rec.ID, Metadata: c.Metadata,
			Labels: c.Labels, Annotations: c.Annotations}), cgroup: rec.Cgroup})
	}
	r.mu.Unlock()
	out := make([]*runtimeapi.ContainerStats, 0, len(todo))
	for _, t := range todo {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, r.cg.stats(t.cgroup, t.attrs))
	}
	return out, nil
}

// stats reads the usage of cgroup rel.
func (c *cgroups) stats(rel string, attrs *runtimeapi.ContainerAttributes) *runtimeapi.ContainerStats {
	now := time.Now().UnixNano()
	st := &runtimeapi.ContainerStats{Attributes: attrs,
		Cpu: &runtimeapi.CpuUsage{Timestamp: now}, Memory: &runtimeapi.MemoryUsage{Timestamp: now}}
	dirs := c.dirs(rel)
	if c.v2 {
		if us, ok := shim.ReadKeyedOK(filepath.Join(dirs[0], "cpu.stat"), "usage_usec"); ok {
			st.Cpu.UsageCoreNanoSeconds = &runtimeapi.UInt64Value{Value: us * 1000}
		}
		if usage, ok := readUint(filepath.Join(dirs[0], "memory.current")); ok {
			stat := filepath.Join(dirs[0], "memory.stat")
			inactive, _ := shim.ReadKeyedOK(stat, "inactive_file")
			anon, _ := shim.ReadKeyedOK(stat, "anon")
			setMemory(st.Memory, usage, inactive, anon)
		}
		return st
	}
	for _, d := range dirs {
		if ns, ok := readUint(filepath.Join(d, "cpuacct.usage")); ok {
			st.Cpu.UsageCoreNanoSeconds = &runtimeapi.UInt64Value{Value: ns}
		}
		if usage, ok := readUint(filepath.Join(d, "memory.usage_in_bytes")); ok {
			stat := filepath.Join(d, "memory.stat")
			inactive, _ := shim.ReadKeyedOK(stat, "total_inactive_file")
			rss, _ := shim.ReadKeyedOK(stat, "total_rss")
			setMemory(st.Memory, usage, inactive, rss)
		}
	}
	return st
}

func setMemory(m *runtimeapi.MemoryUsage, usage, inactiveFile, rss uint64) {
	m.UsageBytes = &runtimeapi.UInt64Value{Value: usage}
	m.WorkingSetBytes = &runtimeapi.UInt64Value{Value: usage - min(inactiveFile, usage)}
	m.RssBytes = &runtimeapi.UInt64Value{Value: rss}
}

// readUint reads a file holding one unsigned number.
func readUint(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}
