package process_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process"
)

// TestMain lets the test binary serve as small container programs selected by
// WH_TEST_PROGRAM (it serves as the runtime's helpers through the shim
// package's init).
func TestMain(m *testing.M) {
	if prog := os.Getenv("WH_TEST_PROGRAM"); prog != "" {
		os.Exit(testProgram(prog, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// hog keeps what the "alloc" program allocates reachable.
var hog [][]byte

// testProgram runs a container program of the test binary.
func testProgram(name string, args []string) int {
	switch name {
	case "alloc": // touch memory until killed
		for {
			b := make([]byte, 8<<20)
			for i := range b {
				b[i] = 1
			}
			hog = append(hog, b)
		}
	case "ignore-term": // ignore SIGTERM, say so, wait forever
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		select {}
	case "serve": // answer "hello from <hostname>" on 127.0.0.1:<args[0]>
		l, err := net.Listen("tcp4", "127.0.0.1:"+args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := l.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "echo %s", line)
			}()
		}
	case "agent":
		return agentProgram(args)
	case "addkey": // add a key to the process keyring: a call the default seccomp profile refuses
		if _, err := unix.AddKey("user", "wheelhouse-test", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING); err != nil {
			fmt.Println(err)
			return 0
		}
		fmt.Println("added")
		return 0
	case "ifaces": // print the network interfaces, one a line
		ifs, err := net.Interfaces()
		if err != nil {
			return 1
		}
		for _, i := range ifs {
			fmt.Println(i.Name)
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown test program %q\n", name)
	return 2
}

// testRuntime opens a process runtime on a fresh state dir with its own
// cgroup root below the test's cgroup, serving its streaming server, and
// removes everything when the test ends.
func testRuntime(t *testing.T) (*process.Runtime, process.Config) {
	t.Helper()
	dir := t.TempDir()
	var b [4]byte
	_, _ = rand.Read(b[:])
	cfg := process.Config{
		StateDir:   filepath.Join(dir, "state"),
		LogDir:     filepath.Join(dir, "logs"),
		CgroupRoot: "wheelhouse-test-" + hex.EncodeToString(b[:]),
		StopGrace:  5 * time.Second,
		Logger:     slog.New(slog.NewTextHandler(testLogWriter{t}, nil)),
	}
	rt := openRuntime(t, cfg)
	t.Cleanup(func() {
		ctx := context.Background()
		rt2, err := process.New(cfg)
		if err != nil {
			t.Errorf("reopen for cleanup: %v", err)
			return
		}
		defer rt2.Close()
		sbs, _ := rt2.ListPodSandbox(ctx, nil)
		for _, s := range sbs {
			if err := rt2.RemovePodSandbox(ctx, s.Id); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		_ = unix.Unmount(filepath.Join(cfg.StateDir, "netns"), unix.MNT_DETACH)
		removeCgroupRoot(cfg.CgroupRoot)
	})
	return rt, cfg
}

// testLogWriter sends the runtime's logs to the test's log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// openRuntime opens a runtime on cfg and serves it until the test ends.
func openRuntime(t *testing.T, cfg process.Config) *process.Runtime {
	t.Helper()
	rt, err := process.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return rt
}

// removeCgroupRoot removes the test's relative cgroup root in every hierarchy.
func removeCgroupRoot(rel string) {
	own, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrl := parts[1]
		if ctrl == "" {
			_ = os.Remove(filepath.Join("/sys/fs/cgroup", parts[2], rel))
			_ = os.Remove(filepath.Join("/sys/fs/cgroup/unified", parts[2], rel))
			continue
		}
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", ctrl, parts[2], rel))
	}
}

func sandboxConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: "uid-" + name},
		Labels:      map[string]string{"io.kubernetes.pod.uid": "uid-" + name, "io.kubernetes.pod.name": name},
		Annotations: map[string]string{"note": "sandbox " + name},
	}
}

func containerConfig(name string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: name},
		Image:       &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
		Command:     cmd,
		LogPath:     name + "/0.log",
		Labels:      map[string]string{"io.kubernetes.container.name": name},
		Annotations: map[string]string{"io.kubernetes.container.restartCount": "0"},
	}
}

// testProgramConfig is a container running a program of the test binary.
func testProgramConfig(t *testing.T, name, prog string, args ...string) *runtimeapi.ContainerConfig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := containerConfig(name, append([]string{self}, args...)...)
	c.Envs = []*runtimeapi.KeyValue{{Key: "WH_TEST_PROGRAM", Value: []byte(prog)}}
	return c
}
