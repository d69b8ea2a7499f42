package containerdtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
)

// Namespace is the containerd namespace the CRI plugin keeps its images, sandboxes and containers in.
const Namespace = "k8s.io"

// snapshotter is the CRI plugin's snapshotter, which ImportImages also unpacks into.
const snapshotter = managed.Snapshotter

// readyTimeout bounds Launch's wait for the CRI plugin to answer and report RuntimeReady.
const readyTimeout = 30 * time.Second

// ErrNeedsRoot is Launch's error when the process does not run as root; Start skips the test instead.
var ErrNeedsRoot = errors.New("containerdtest: needs root (containerd mounts snapshots; runc creates namespaces and cgroups)")

// Options configures Launch and Start. The zero value runs containerd in the calling process's network
// namespace with an empty CNI configuration directory, which is enough for pods in the node's network
// (NamespaceMode_NODE).
type Options struct {
	// Dir is the instance's directory: config.toml, containerd.log, root, state and the default CNI conf dir.
	// "" is a fresh directory (Start: under the test's temp dir; Launch: under os.TempDir(), removed by Close).
	// A Dir given here is the caller's: Close removes root and state in it but leaves the configuration and
	// the log.
	Dir string
	// NetNS is the path of a network namespace (e.g. /run/netns/NAME) to run containerd in, entered with
	// nsenter --net; "" runs it in the calling process's. Host-network pods share it; pods with their own
	// network are set up by CNI from in there. CRI's streaming server listens on 127.0.0.1 in it, so its
	// loopback must be up for exec, attach and port-forward URLs to answer.
	NetNS string
	// CNIConfDir is the CRI plugin's CNI conf_dir; "" is a fresh empty directory under Dir, in which case
	// NetworkReady stays false until the caller writes a configuration there.
	CNIConfDir string
	// CNIBinDir is the CRI plugin's CNI bin_dir; "" is /usr/lib/cni (Debian's containernetworking-plugins).
	CNIBinDir string
	// PauseImage is the CRI plugin's sandbox_image; "" is PauseImage. Import it (BuildPause) before running pods.
	PauseImage string
	// RegistryConfigPath is the CRI plugin's registry config_path (hosts directories, e.g. the ones an agent
	// renders from its registries.yaml under <data-dir>/registries.d); "" leaves it unset.
	RegistryConfigPath string
	// Logger receives what Close does beyond the ordinary (a crashed containerd, leftover shims killed);
	// nil discards it. Start logs to the test.
	Logger *slog.Logger
}

// Containerd is a containerd started by Launch (or Start, for one test), with its own root, state, sockets
// and log. Its methods are safe for concurrent use; the caller owns the paths until Close removes them.
type Containerd struct {
	// Socket is the unix socket path of containerd's gRPC API; the CRI services are served there too.
	Socket string
	// Root and State are containerd's root (images, snapshots, metadata) and state (tasks, sockets, netns
	// mounts, runc's state) directories, both private to this instance.
	Root, State string
	// Dir is the instance's directory (Options.Dir): config.toml, containerd.log, root, state.
	Dir string
	// Config is the path of the containerd configuration Launch wrote.
	Config string
	// Log is the path of containerd's combined stdout and stderr.
	Log string
	// CNIConfDir and CNIBinDir are the CRI plugin's CNI directories.
	CNIConfDir, CNIBinDir string
	// NetNS is the network namespace containerd runs in ("" for the calling process's).
	NetNS string

	log     *slog.Logger
	ownDir  bool   // Dir was created by Launch, and Close removes it
	sockDir string // short-pathed directory holding the gRPC and ttrpc sockets, removed by Close
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for; waitErr is set before
	waitErr error
	conn    *grpc.ClientConn

	closeOnce sync.Once
	closeErr  error // Close's result, set once
}

// Launch starts containerd with a configuration of its own (see the package documentation) and waits until its
// CRI plugin answers Version and reports RuntimeReady. The caller must Close the instance, which removes
// everything it created on the machine. Launch fails with ErrNeedsRoot unless it runs as root, and fails when
// containerd, runc or the shim are missing or containerd does not become ready within 30 s (or before ctx
// ends); it then cleans up what it started itself, and the error carries the end of containerd's log.
func Launch(ctx context.Context, opts Options) (*Containerd, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNeedsRoot
	}
	bins, err := lookBinaries(opts.NetNS != "")
	if err != nil {
		return nil, err
	}
	c, err := configure(opts)
	if c == nil {
		return nil, err
	}
	hostDirs.acquire()
	if err == nil {
		err = c.start(bins)
	}
	if err == nil {
		if err = c.waitReady(ctx); err != nil {
			err = fmt.Errorf("containerdtest: %w; end of %s:\n%s", err, c.Log, c.tail(20))
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Start is Launch for a test: it skips the test unless it runs as root, fails it if Launch fails, and
// registers Close as a cleanup (an error of it fails the test; a failed test also gets the last 100 lines of
// containerd's log). The instance's Dir defaults to one under the test's temp dir, and Close logs to the test.
func Start(t testing.TB, opts Options) *Containerd {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{ReplaceAttr: dropTime}))
	}
	began := time.Now()
	c, err := Launch(t.Context(), opts)
	if errors.Is(err, ErrNeedsRoot) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("containerdtest: cleanup: %v", err)
		}
		if t.Failed() {
			t.Logf("containerdtest: last lines of %s:\n%s", c.Log, c.tail(100))
		}
	})
	t.Logf("containerdtest: containerd ready on %s in %s", c.Socket, time.Since(began).Round(time.Millisecond))
	return c
}

// dropTime leaves the time out of a test's log lines, which the test output orders already.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Runtime is a CRI RuntimeService client on the instance's socket.
func (c *Containerd) Runtime() runtimeapi.RuntimeServiceClient {
	return runtimeapi.NewRuntimeServiceClient(c.conn)
}

// Images is a CRI ImageService client on the instance's socket.
func (c *Containerd) Images() runtimeapi.ImageServiceClient {
	return runtimeapi.NewImageServiceClient(c.conn)
}

// PID is containerd's process ID (nsenter, when the instance has a network namespace, execs containerd in
// its own place), for reading its CPU time and memory; its shims are separate processes (Shims).
func (c *Containerd) PID() int {
	return c.cmd.Process.Pid
}

// Shims are the process IDs of the instance's runc v2 shims (one per pod sandbox with containerd 1.6's
// grouping), found by their command line. The containers are their children.
func (c *Containerd) Shims() []int {
	var pids []int
	for _, p := range processes() {
		if c.ownShim(p.args) {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// binaries are the paths of the programs Launch runs.
type binaries struct{ containerd, nsenter string }

// lookBinaries finds containerd, and checks for the programs containerd and Import run themselves.
func lookBinaries(netns bool) (binaries, error) {
	names := []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2"}
	if netns {
		names = append(names, "nsenter")
	}
	paths := map[string]string{}
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			return binaries{}, fmt.Errorf("containerdtest: %s not found (install Debian's containerd, runc and util-linux packages; scripts/ensure-tools.sh does): %w", n, err)
		}
		paths[n] = p
	}
	return binaries{containerd: paths["containerd"], nsenter: paths["nsenter"]}, nil
}

// configure lays out an instance under opts.Dir (or a new directory) and writes its configuration. The
// sockets go to a directory of their own under os.TempDir(): a unix socket path must fit in 108 bytes, which
// test temp dirs may not. It returns nil only if it created nothing; otherwise the caller must Close what it
// returns, also with an error.
func configure(opts Options) (*Containerd, error) {
	dir, ownDir := opts.Dir, opts.Dir == ""
	if ownDir {
		var err error
		if dir, err = os.MkdirTemp("", "containerdtest-"); err != nil {
			return nil, fmt.Errorf("containerdtest: %w", err)
		}
	}
	sockDir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		if ownDir {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("containerdtest: socket dir: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Containerd{
		log:        log,
		ownDir:     ownDir,
		Socket:     filepath.Join(sockDir, "containerd.sock"),
		Root:       filepath.Join(dir, "root"),
		State:      filepath.Join(dir, "state"),
		Dir:        dir,
		Config:     filepath.Join(dir, "config.toml"),
		Log:        filepath.Join(dir, "containerd.log"),
		CNIConfDir: opts.CNIConfDir,
		CNIBinDir:  opts.CNIBinDir,
		NetNS:      opts.NetNS,
		sockDir:    sockDir,
		exited:     make(chan struct{}),
	}
	if c.CNIConfDir == "" {
		c.CNIConfDir = filepath.Join(dir, "cni")
	}
	if c.CNIBinDir == "" {
		c.CNIBinDir = "/usr/lib/cni"
	}
	pause := opts.PauseImage
	if pause == "" {
		pause = PauseImage
	}
	for _, d := range []string{c.Root, c.State, c.CNIConfDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return c, fmt.Errorf("containerdtest: %w", err)
		}
	}
	// The agent's own containerd's configuration (restrict_oom_score_adj always: root here lacks
	// CAP_SYS_RESOURCE), with the instance's sockets in sockDir.
	if err := managed.WriteConfig(c.Config, managed.Layout{Root: c.Root, State: c.State, Socket: c.Socket,
		TTRPCSocket: filepath.Join(c.sockDir, "ttrpc.sock"), CNIConfDir: c.CNIConfDir, CNIBinDir: c.CNIBinDir,
		PauseImage: pause, RestrictOOMScoreAdj: true, RegistryConfigPath: opts.RegistryConfigPath}); err != nil {
		return c, fmt.Errorf("containerdtest: %w", err)
	}
	return c, nil
}

// start runs containerd (under nsenter when the instance has a network namespace) with its output to the log.
func (c *Containerd) start(bins binaries) error {
	log, err := os.Create(c.Log)
	if err != nil {
		return fmt.Errorf("containerdtest: %w", err)
	}
	defer log.Close()
	args := []string{bins.containerd, "--config", c.Config}
	if c.NetNS != "" {
		args = append([]string{bins.nsenter, "--net=" + c.NetNS}, args...)
	}
	c.cmd = exec.Command(args[0], args[1:]...)
	c.cmd.Stdout, c.cmd.Stderr = log, log
	// A process that dies without closing the instance takes containerd with it (its shims stay: they are
	// started in sessions of their own, as they must outlive containerd restarts).
	if err := managed.StartChild(c.cmd); err != nil {
		close(c.exited)
		return fmt.Errorf("containerdtest: start containerd: %w", err)
	}
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	return nil
}

// waitReady waits until CRI answers Version and reports RuntimeReady (managed.WaitReady) for readyTimeout, and
// keeps the connection.
func (c *Containerd) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	conn, err := managed.WaitReady(ctx, c.Socket, c.exited)
	if err != nil {
		if !c.running() {
			err = fmt.Errorf("%w: %v", err, c.waitErr)
		}
		return err
	}
	c.conn = conn
	return nil
}
