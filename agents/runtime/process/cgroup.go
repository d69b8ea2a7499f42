package process

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupControllers are the controllers the runtime uses.
var cgroupControllers = []string{"memory", "cpu", "pids"}

// cgroups places pods and containers in cgroups below a root: on v2 one
// directory per cgroup, on v1 one per controller hierarchy. A cgroup is named
// by its path relative to the root ("pod-<id>/<container id>").
type cgroups struct {
	v2 bool
	// bases are the root's directories: one on v2, one per mounted
	// controller (memory, cpu, pids) on v1.
	bases []cgroupBase
}

type cgroupBase struct {
	controller string // "" on v2
	dir        string
}

// cgroupResources are the limits written to a cgroup; zero means unset.
type cgroupResources struct {
	MemoryLimit int64 // bytes
	SwapLimit   int64 // memory+swap bytes (CRI's MemorySwapLimitInBytes)
	CPUQuota    int64 // microseconds per period
	CPUPeriod   int64 // microseconds
	CPUShares   int64 // v1 shares, converted to cpu.weight on v2
	PidsLimit   int64
}

// detectCgroups finds the hierarchy (v2 if /sys/fs/cgroup is cgroup2, else
// the v1 controller mounts) and the root's directories.
func detectCgroups(root string) (*cgroups, error) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, fmt.Errorf("statfs /sys/fs/cgroup: %w", err)
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	join := func(mount, self string) string {
		if filepath.IsAbs(root) {
			return filepath.Join(mount, root)
		}
		return filepath.Join(mount, self, root)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return &cgroups{v2: true, bases: []cgroupBase{{dir: join("/sys/fs/cgroup", own[""])}}}, nil
	}
	mounts, err := v1Mounts()
	if err != nil {
		return nil, err
	}
	cg := &cgroups{}
	for _, c := range cgroupControllers {
		if m, ok := mounts[c]; ok {
			cg.bases = append(cg.bases, cgroupBase{controller: c, dir: join(m, own[c])})
		}
	}
	// CPU accounting (cpuacct.usage, for the Summary API) lives in the cpu hierarchy when the two are mounted
	// together, else in a hierarchy of its own where containers get a cgroup too (with no limits).
	if m, ok := mounts["cpuacct"]; ok && m != mounts["cpu"] {
		cg.bases = append(cg.bases, cgroupBase{controller: "cpuacct", dir: join(m, own["cpuacct"])})
	}
	if len(cg.bases) == 0 {
		return nil, errors.New("no cgroup v1 memory, cpu or pids hierarchy is mounted")
	}
	return cg, nil
}

// ownCgroups maps each controller (v2: "") to this process's cgroup path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out, sc.Err()
}

// v1Mounts maps each v1 controller to its mount point.
func v1Mounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(tail) < 3 || tail[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(tail[2], ",") {
			if slices.Contains(cgroupControllers, opt) || opt == "cpuacct" {
				out[opt] = fields[4]
			}
		}
	}
	return out, sc.Err()
}

// dirs returns the directories of cgroup rel, one per hierarchy.
func (c *cgroups) dirs(rel string) []string {
	out := make([]string, len(c.bases))
	for i, b := range c.bases {
		out[i] = filepath.Join(b.dir, rel)
	}
	return out
}

// create makes cgroup rel (and its parents) and writes res into it.
func (c *cgroups) create(rel string, res cgroupResources) error {
	for _, b := range c.bases {
		dir := filepath.Join(b.dir, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if c.v2 {
			c.enableControllers(dir)
		}
		if err := c.write(b.controller, dir, res); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// enableControllers turns memory, cpu and pids on in every ancestor of dir
// below the v2 mount, so dir gets their interface files. Best effort: an
// ancestor that holds processes refuses, and the missing files are then
// reported by write.
func (c *cgroups) enableControllers(dir string) {
	var chain []string
	for d := filepath.Dir(dir); d != "/sys/fs" && d != "/" && d != "."; d = filepath.Dir(d) {
		chain = append(chain, d)
	}
	slices.Reverse(chain)
	for _, d := range chain {
		avail, err := os.ReadFile(filepath.Join(d, "cgroup.controllers"))
		if err != nil {
			continue
		}
		var on []string
		for _, ctl := range cgroupControllers {
			if slices.Contains(strings.Fields(string(avail)), ctl) {
				on = append(on, "+"+ctl)
			}
		}
		_ = os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(strings.Join(on, " ")), 0)
	}
}

// write writes res into dir, a cgroup of the given v1 controller ("" on v2).
func (c *cgroups) write(controller, dir string, res cgroupResources) error {
	var files [][2]string
	if c.v2 {
		files = v2Files(res)
	} else {
		files = v1Files(controller, res)
	}
	for _, f := range files {
		path := filepath.Join(dir, f[0])
		if err := os.WriteFile(path, []byte(f[1]), 0); err != nil {
			if errors.Is(err, fs.ErrNotExist) && optionalFile(f[0]) {
				continue
			}
			return fmt.Errorf("write %s=%s: %w", f[0], f[1], err)
		}
	}
	return nil
}

// update writes res into the existing cgroup rel, replacing its memory and cpu limits: unlike create, an unset
// limit is written as none ("max", -1), so that a limit can also be lifted. On v1, memory.limit_in_bytes and
// memory.memsw.limit_in_bytes are written in the order the kernel accepts (the swap limit may never be below
// the memory limit).
func (c *cgroups) update(rel string, res cgroupResources) error {
	for _, b := range c.bases {
		dir := filepath.Join(b.dir, rel)
		var files [][2]string
		if c.v2 {
			files = v2UpdateFiles(res)
		} else {
			files = v1UpdateFiles(b.controller, dir, res)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0); err != nil {
				if errors.Is(err, fs.ErrNotExist) && optionalFile(f[0]) {
					continue
				}
				return fmt.Errorf("cgroup %s: write %s=%s: %w", dir, f[0], f[1], err)
			}
		}
	}
	return nil
}

// v2UpdateFiles lists the (file, value) pairs update writes on cgroup v2.
func v2UpdateFiles(res cgroupResources) [][2]string {
	mem := "max"
	if res.MemoryLimit > 0 {
		mem = strconv.FormatInt(res.MemoryLimit, 10)
	}
	quota, period := "max", res.CPUPeriod
	if res.CPUQuota > 0 {
		quota = strconv.FormatInt(res.CPUQuota, 10)
	}
	if period <= 0 {
		period = 100000
	}
	out := [][2]string{{"memory.max", mem}, {"cpu.max", quota + " " + strconv.FormatInt(period, 10)}}
	if res.CPUShares > 0 {
		out = append(out, [2]string{"cpu.weight", strconv.FormatUint(cpuSharesToWeight(uint64(res.CPUShares)), 10)})
	}
	return out
}

// v1UpdateFiles lists the (file, value) pairs update writes in dir, a cgroup of a v1 controller hierarchy.
func v1UpdateFiles(controller, dir string, res cgroupResources) [][2]string {
	switch controller {
	case "memory":
		limit, swap := int64(-1), int64(-1)
		if res.MemoryLimit > 0 {
			limit, swap = res.MemoryLimit, max(res.SwapLimit, res.MemoryLimit)
		}
		mem := [2]string{"memory.limit_in_bytes", strconv.FormatInt(limit, 10)}
		memsw := [2]string{"memory.memsw.limit_in_bytes", strconv.FormatInt(swap, 10)}
		cur, err := readInt(filepath.Join(dir, "memory.limit_in_bytes"))
		if err == nil && (limit == -1 || limit > cur) {
			return [][2]string{memsw, mem} // raising: the swap limit first
		}
		return [][2]string{mem, memsw}
	case "cpu":
		quota, period := res.CPUQuota, res.CPUPeriod
		if quota <= 0 {
			quota = -1
		}
		if period <= 0 {
			period = 100000
		}
		out := [][2]string{{"cpu.cfs_period_us", strconv.FormatInt(period, 10)}, {"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)}}
		if res.CPUShares > 0 {
			out = append(out, [2]string{"cpu.shares", strconv.FormatInt(res.CPUShares, 10)})
		}
		return out
	}
	return nil
}

// readInt reads a file holding one integer.
func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// optionalFile reports whether a missing file may be skipped (swap
// accounting is often compiled out).
func optionalFile(name string) bool {
	return name == "memory.swap.max" || name == "memory.memsw.limit_in_bytes"
}

// v2Files lists the (file, value) pairs for res on cgroup v2.
func v2Files(res cgroupResources) [][2]string {
	var out [][2]string
	if res.MemoryLimit > 0 {
		out = append(out, [2]string{"memory.max", strconv.FormatInt(res.MemoryLimit, 10)})
		out = append(out, [2]string{"memory.swap.max", strconv.FormatInt(max(res.SwapLimit-res.MemoryLimit, 0), 10)})
	}
	if res.CPUQuota > 0 || res.CPUPeriod > 0 {
		quota, period := "max", res.CPUPeriod
		if res.CPUQuota > 0 {
			quota = strconv.FormatInt(res.CPUQuota, 10)
		}
		if period == 0 {
			period = 100000
		}
		out = append(out, [2]string{"cpu.max", quota + " " + strconv.FormatInt(period, 10)})
	}
	if res.CPUShares > 0 {
		out = append(out, [2]string{"cpu.weight", strconv.FormatUint(cpuSharesToWeight(uint64(res.CPUShares)), 10)})
	}
	if res.PidsLimit > 0 {
		out = append(out, [2]string{"pids.max", strconv.FormatInt(res.PidsLimit, 10)})
	}
	return out
}

// v1Files lists the (file, value) pairs for res in a v1 controller hierarchy.
func v1Files(controller string, res cgroupResources) [][2]string {
	var out [][2]string
	switch controller {
	case "memory":
		if res.MemoryLimit > 0 {
			swap := max(res.SwapLimit, res.MemoryLimit) // no swap unless asked
			out = append(out,
				[2]string{"memory.limit_in_bytes", strconv.FormatInt(res.MemoryLimit, 10)},
				[2]string{"memory.memsw.limit_in_bytes", strconv.FormatInt(swap, 10)})
		}
	case "cpu":
		if res.CPUPeriod > 0 {
			out = append(out, [2]string{"cpu.cfs_period_us", strconv.FormatInt(res.CPUPeriod, 10)})
		}
		if res.CPUQuota > 0 {
			out = append(out, [2]string{"cpu.cfs_quota_us", strconv.FormatInt(res.CPUQuota, 10)})
		}
		if res.CPUShares > 0 {
			out = append(out, [2]string{"cpu.shares", strconv.FormatInt(res.CPUShares, 10)})
		}
	case "pids":
		if res.PidsLimit > 0 {
			out = append(out, [2]string{"pids.max", strconv.FormatInt(res.PidsLimit, 10)})
		}
	}
	return out
}

// cpuSharesToWeight converts v1 cpu.shares [2, 262144] to v2 cpu.weight
// [1, 10000] with the quadratic mapping runc uses since 1.3 (and crun): it
// keeps the default 1024 at the default weight 100, which the older linear
// formula (1 + (shares-2)*9999/262142 = 39) did not.
func cpuSharesToWeight(shares uint64) uint64 {
	switch {
	case shares == 0:
		return 0
	case shares <= 2:
		return 1
	case shares >= 262144:
		return 10000
	}
	l := math.Log2(float64(shares))
	exponent := (l*l+125*l)/612.0 - 7.0/34.0
	return uint64(math.Ceil(math.Pow(10, exponent)))
}

// procsFiles returns the cgroup.procs files a process joins to enter rel.
func (c *cgroups) procsFiles(rel string) []string {
	dirs := c.dirs(rel)
	for i, d := range dirs {
		dirs[i] = filepath.Join(d, "cgroup.procs")
	}
	return dirs
}

// killAll SIGKILLs every process in rel and its descendants.
func (c *cgroups) killAll(rel string) {
	for _, d := range c.dirs(rel) {
		if c.v2 {
			if err := os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0); err == nil {
				continue
			}
		}
		_ = filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
			return nil
		})
	}
}

// remove deletes rel and its descendants, retrying while dying processes
// still hold them, for up to wait.
func (c *cgroups) remove(rel string, wait time.Duration) error {
	var errs []error
	for _, d := range c.dirs(rel) {
		errs = append(errs, removeCgroupDir(d, time.Now().Add(wait)))
	}
	return errors.Join(errs...)
}

// removeCgroupDir removes dir's child cgroups depth-first, then dir.
func removeCgroupDir(dir string, deadline time.Time) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupDir(filepath.Join(dir, e.Name()), deadline); err != nil {
				return err
			}
		}
	}
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond) // processes in it are still exiting
	}
}
