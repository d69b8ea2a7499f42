package kubelet

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Host is what the node reports about its machine. ReadHost fills it from /proc, /etc and the kernel; tests
// and hollow nodes build their own.
type Host struct {
	Hostname string
	CPUs     int
	// MemoryBytes is MemTotal; MemoryAvailableBytes is MemAvailable (for MemoryPressure).
	MemoryBytes, MemoryAvailableBytes int64
	// DiskBytes and DiskAvailableBytes are the data dir's file system (ephemeral storage, DiskPressure).
	DiskBytes, DiskAvailableBytes int64
	// PIDs in use and the kernel's limit (PIDPressure).
	PIDs, PIDMax                                    int64
	MachineID, BootID, KernelVersion, OSImage, Arch string
	// InternalIP is the address other nodes reach this one on.
	InternalIP string
}

// ReadHost reads this machine's facts; dataDir is the file system whose space counts as ephemeral storage.
// nodeIP overrides the InternalIP guess (the source address of the default route).
func ReadHost(dataDir, nodeIP string) (Host, error) {
	h := Host{CPUs: runtime.NumCPU(), Arch: runtime.GOARCH}
	var err error
	if h.Hostname, err = os.Hostname(); err != nil {
		return h, err
	}
	if err := h.readMemory(); err != nil {
		return h, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dataDir, &fs); err != nil {
		return h, fmt.Errorf("kubelet: the data dir's file system: %w", err)
	}
	h.DiskBytes, h.DiskAvailableBytes = int64(fs.Blocks)*fs.Bsize, int64(fs.Bavail)*fs.Bsize
	h.PIDMax = readInt("/proc/sys/kernel/pid_max")
	h.PIDs = countPIDs()
	h.MachineID = readTrim("/etc/machine-id")
	h.BootID = readTrim("/proc/sys/kernel/random/boot_id")
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	h.OSImage = osImage()
	h.InternalIP = nodeIP
	if h.InternalIP == "" {
		h.InternalIP = outboundIP()
	}
	return h, nil
}

func (h *Host) readMemory() error {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "MemTotal:":
			h.MemoryBytes = kb * 1024
		case "MemAvailable:":
			h.MemoryAvailableBytes = kb * 1024
		}
	}
	return sc.Err()
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return string(bytes.TrimSpace(b))
}

func readInt(path string) int64 {
	v, _ := strconv.ParseInt(readTrim(path), 10, 64)
	return v
}

func countPIDs() int64 {
	entries, _ := os.ReadDir("/proc")
	var n int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}

func osImage() string {
	b, _ := os.ReadFile("/etc/os-release")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "Linux"
}

// outboundIP is the local address of a (never sent) UDP flow to a public address: the default route's source.
func outboundIP() string {
	c, err := net.Dial("udp4", "192.0.2.1:9") // TEST-NET-1: nothing is sent
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// capacity is the node's capacity; allocatable is the same less nothing reserved yet (kubelet's
// --system-reserved / --kube-reserved are not offered).
func (h Host) capacity(maxPods int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(h.CPUs), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(h.MemoryBytes, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(h.DiskBytes, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
}
