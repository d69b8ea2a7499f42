package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// This machine's kernel mounts cgroup v1 (its v2 mount has no controllers), so the v2 path cannot run against
// the kernel here; these tests check what it writes where, on a directory laid out like a v2 hierarchy. The
// lifecycle tests exercise the v1 path against the kernel.

func TestV2Files(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  cgroupResources
		want string
	}{
		{"nothing", cgroupResources{}, ""},
		{"memory without swap", cgroupResources{MemoryLimit: 64 << 20}, "memory.max=67108864 memory.swap.max=0"},
		{"memory with swap", cgroupResources{MemoryLimit: 64 << 20, SwapLimit: 96 << 20}, "memory.max=67108864 memory.swap.max=33554432"},
		{"cpu quota", cgroupResources{CPUQuota: 50000, CPUPeriod: 100000}, "cpu.max=50000 100000"},
		{"cpu quota, default period", cgroupResources{CPUQuota: 25000}, "cpu.max=25000 100000"},
		{"period only: no quota", cgroupResources{CPUPeriod: 50000}, "cpu.max=max 50000"},
		{"default shares", cgroupResources{CPUShares: 1024}, "cpu.weight=100"},
		{"pids", cgroupResources{PidsLimit: 512}, "pids.max=512"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range v2Files(tc.res) {
				got = append(got, f[0]+"="+f[1])
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("v2Files = %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestV2Create: a pod and a container cgroup made below a v2 root get their limits, and the root's ancestors
// (here: the root itself) delegate the memory, cpu and pids controllers that are available.
func TestV2Create(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(root, "wheelhouse")
	c := &cgroups{v2: true, bases: []cgroupBase{{dir: base}}}
	if err := c.create("pod-1", cgroupResources{CPUShares: 2048}); err != nil {
		t.Fatal(err)
	}
	if err := c.create("pod-1/ctr-1", cgroupResources{MemoryLimit: 32 << 20, CPUQuota: 20000, CPUPeriod: 100000}); err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(base, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for rel, want := range map[string]string{
		"pod-1/cpu.weight":            "174", // runc: ceil(10^((l²+125l)/612 - 7/34)), l = log2(2048)
		"pod-1/ctr-1/memory.max":      "33554432",
		"pod-1/ctr-1/memory.swap.max": "0",
		"pod-1/ctr-1/cpu.max":         "20000 100000",
		"../cgroup.subtree_control":   "+memory +cpu +pids",
	} {
		if got := read(rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	if got := c.procsFiles("pod-1/ctr-1"); len(got) != 1 || got[0] != filepath.Join(base, "pod-1/ctr-1/cgroup.procs") {
		t.Errorf("procsFiles = %v: a v2 process joins one cgroup", got)
	}
	if err := os.WriteFile(filepath.Join(base, "pod-1/ctr-1/memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !shim.OOMKilled([]string{filepath.Join(base, "pod-1/ctr-1/memory.events"), filepath.Join(base, "pod-1/ctr-1/memory.oom_control")}) {
		t.Error("oom_kill 1 in memory.events is not an OOM kill")
	}
	if err := c.remove("pod-1", 0); err == nil {
		// Plain directories with files in them are not removable by rmdir, unlike cgroups (whose interface
		// files are not files): remove must report that rather than pretend.
		t.Error("remove of a directory that is not a cgroup succeeded")
	}
}

// TestV2Update: an update writes every limit of a v2 cgroup, a lifted one as "max".
func TestV2Update(t *testing.T) {
	base := t.TempDir()
	c := &cgroups{v2: true, bases: []cgroupBase{{dir: base}}}
	if err := os.MkdirAll(filepath.Join(base, "pod-1/ctr-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		res  cgroupResources
		want map[string]string
	}{
		{cgroupResources{MemoryLimit: 40 << 20, CPUQuota: 3500, CPUPeriod: 100000, CPUShares: 25},
			map[string]string{"memory.max": "41943040", "cpu.max": "3500 100000", "cpu.weight": "6"}},
		{cgroupResources{CPUPeriod: 100000, CPUShares: 1024},
			map[string]string{"memory.max": "max", "cpu.max": "max 100000", "cpu.weight": "100"}},
	} {
		if err := c.update("pod-1/ctr-1", tc.res); err != nil {
			t.Fatal(err)
		}
		for f, want := range tc.want {
			if b, err := os.ReadFile(filepath.Join(base, "pod-1/ctr-1", f)); err != nil || string(b) != want {
				t.Errorf("%+v: %s = %q %v, want %q", tc.res, f, b, err, want)
			}
		}
	}
}

func TestCPUSharesToWeight(t *testing.T) {
	for _, tc := range []struct{ shares, weight uint64 }{
		{0, 0}, {2, 1}, {1024, 100}, {512, 59}, {262144, 10000}, {300000, 10000},
	} {
		if got := cpuSharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("cpuSharesToWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
}
