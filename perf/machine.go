package perf

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Machine describes where the numbers were measured.
type Machine struct {
	CPUs      int
	CPUModel  string
	MemoryGiB float64
	Kernel    string
	OS        string
	Go        string
	// Commit is the wheelhouse commit measured, with "+dirty" when the work tree had changes.
	Commit string
	// FsyncP50 is the median time of a 4 KiB write plus fdatasync in the temp directory: the floor of one
	// durable commit on this disk.
	FsyncP50 time.Duration
	// PageTouch is the median time to touch a page of fresh anonymous memory the first time (the page fault and
	// the kernel zeroing it), and ExecTrue the median time to run /bin/true (fork, exec, exit, wait). Virtual
	// machines differ most here: they set what starting a process or growing a heap costs, so they tell runs on
	// different machines apart.
	PageTouch, ExecTrue time.Duration
}

func readMachine(repoDir, tmpDir string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var n float64
		for _, c := range strings.TrimSuffix(kb, " kB") {
			if c >= '0' && c <= '9' {
				n = n*10 + float64(c-'0')
			}
		}
		m.MemoryGiB = n / (1 << 20)
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.OS = strings.Trim(procField("/etc/os-release", "PRETTY_NAME"), `"`)
	m.Commit = gitCommit(repoDir)
	m.FsyncP50 = fsyncProbe(tmpDir)
	m.PageTouch, m.ExecTrue = pageTouchProbe(), execProbe()
	return m
}

// pageTouchProbe touches every page of a fresh 64 MiB anonymous mapping, five times, and returns the median
// time per page.
func pageTouchProbe() time.Duration {
	const size = 64 << 20
	page := os.Getpagesize()
	var ds []time.Duration
	for range 5 {
		b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return 0
		}
		t0 := time.Now()
		for i := 0; i < size; i += page {
			b[i] = 1
		}
		ds = append(ds, time.Since(t0)/time.Duration(size/page))
		_ = syscall.Munmap(b)
	}
	return percentile(ds, 50)
}

// execProbe runs /bin/true 20 times and returns the median time of one run.
func execProbe() time.Duration {
	var ds []time.Duration
	for range 20 {
		t0 := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			return 0
		}
		ds = append(ds, time.Since(t0))
	}
	return percentile(ds, 50)
}

// procField returns the value of the first "key: value" or "key=value" line for key.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key) {
			continue
		}
		rest := strings.TrimLeft(line[len(key):], " \t")
		if len(rest) > 0 && (rest[0] == ':' || rest[0] == '=') {
			return strings.TrimSpace(rest[1:])
		}
	}
	return ""
}

func gitCommit(dir string) string {
	out, err := exec.Command("git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

func fsyncProbe(dir string) time.Duration {
	f, err := os.Create(filepath.Join(dir, "fsync-probe"))
	if err != nil {
		return 0
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var ds []time.Duration
	for i := range 200 {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, int64(i%16)*4096); err != nil {
			return 0
		}
		if err := fdatasync(f); err != nil {
			return 0
		}
		ds = append(ds, time.Since(t0))
	}
	return percentile(ds, 50)
}

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
