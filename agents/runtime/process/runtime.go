package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime"
)

// RuntimeName and Version are what Version reports.
const (
	RuntimeName = "wheelhouse-process"
	Version     = "0.1.0"
)

// Runtime is the process runtime. Create it with New, serve its streaming
// server with Start.
type Runtime struct {
	cfg      Config
	log      *slog.Logger
	cg       *cgroups
	stream   streaming.Server
	listener net.Listener
	http     *http.Server

	// mu guards the maps below and the records they hold (and their files).
	// It is held for bookkeeping only, never while waiting for a process.
	mu         sync.Mutex
	sandboxes  map[string]*sandboxRecord
	containers map[string]*containerRecord
	starting   map[string]bool // containers whose StartContainer is under way
	images     map[string]bool

	tokens execTokens // exec requests awaiting a v5 websocket

	// updates serializes UpdateContainerResources: each rewrites a container's cgroup and then its record, and
	// two at once could leave the record saying what the cgroup no longer holds. Taken before mu, never inside.
	updates sync.Mutex
}

var (
	_ runtime.Runtime     = (*Runtime)(nil)
	_ runtime.ImagePuller = (*Runtime)(nil)
)

// New opens the runtime on cfg.StateDir, re-adopting the sandboxes and
// containers recorded there (running ones keep running), and opens the
// streaming server's listener. Exec, Attach and PortForward URLs are served
// once Start runs.
func New(cfg Config) (*Runtime, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	r := &Runtime{cfg: cfg, log: cfg.Logger, starting: map[string]bool{}, images: map[string]bool{}}
	for _, d := range []string{r.path("sandboxes"), r.path("containers"), cfg.LogDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, fmt.Errorf("process runtime: %w", err)
		}
	}
	if err := ensureSharedDir(r.path("netns")); err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	cg, err := detectCgroups(cfg.CgroupRoot)
	if err != nil {
		return nil, fmt.Errorf("process runtime: cgroups: %w", err)
	}
	if err := cg.create("", cgroupResources{}); err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	r.cg = cg
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("process runtime: load state: %w", err)
	}
	if err := r.openStreaming(); err != nil {
		return nil, fmt.Errorf("process runtime: streaming server: %w", err)
	}
	r.log.Info("process runtime opened", "stateDir", cfg.StateDir, "cgroupV2", cg.v2,
		"sandboxes", len(r.sandboxes), "containers", len(r.containers), "stream", r.listener.Addr().String())
	return r, nil
}

// load reads the state and removes what crashed creates left half-made.
func (r *Runtime) load() error {
	var sbOrphans, ctrOrphans []string
	var err error
	if r.sandboxes, sbOrphans, err = loadSandboxes(r.path("sandboxes")); err != nil {
		return err
	}
	if r.containers, ctrOrphans, err = loadContainers(r.path("containers")); err != nil {
		return err
	}
	for _, id := range sbOrphans {
		r.log.Warn("removing half-created sandbox", "sandbox", id)
		_ = removeNetns(r.path("netns", id))
		_ = removeNetns(r.path("netns", id+".ipc"))
		_ = r.cg.remove("pod-"+id, time.Second)
		_ = os.RemoveAll(r.sandboxDir(id))
	}
	for _, id := range ctrOrphans {
		r.log.Warn("removing half-created container", "container", id)
		_ = os.RemoveAll(r.containerDir(id))
	}
	return nil
}

// openStreaming listens on cfg.StreamAddr and builds the CRI streaming server.
func (r *Runtime) openStreaming() error {
	network, addr := "tcp", r.cfg.StreamAddr
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", p
		_ = os.Remove(p)
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	base := &url.URL{Scheme: "http", Host: l.Addr().String(), Path: "/"}
	if network == "unix" {
		base.Host = "localhost" // the consumer dials the socket
	}
	cfg := streaming.DefaultConfig
	cfg.Addr, cfg.BaseURL = l.Addr().String(), base
	srv, err := streaming.NewServer(cfg, streamRuntime{r})
	if err != nil {
		l.Close()
		return err
	}
	r.listener, r.stream, r.http = l, srv, &http.Server{Handler: r}
	return nil
}

// Start serves the streaming server until ctx is done.
func (r *Runtime) Start(ctx context.Context) error {
	go func() {
		<-ctx.Done()
		r.http.Close()
	}()
	if err := r.http.Serve(r.listener); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("process runtime: streaming server: %w", err)
	}
	return nil
}

// Close stops the streaming server. Sandboxes and containers keep running;
// a later New on the same StateDir re-adopts them.
func (r *Runtime) Close() error {
	err := r.http.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	r.listener.Close()
	return err
}

// StreamAddr is the streaming server's listening address.
func (r *Runtime) StreamAddr() net.Addr { return r.listener.Addr() }

// Version implements runtime.Versioner.
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           Version,
		RuntimeName:       RuntimeName,
		RuntimeVersion:    Version,
		RuntimeApiVersion: "v1",
	}, nil
}

// PullImage records the image, which the process runtime does not use, and
// returns its name as the reference.
func (r *Runtime) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if image.GetImage() == "" {
		return "", runtime.InvalidArgumentError("image is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.images[image.Image] = true
	return image.Image, nil
}

// path joins elem to the state directory.
func (r *Runtime) path(elem ...string) string {
	return filepath.Join(append([]string{r.cfg.StateDir}, elem...)...)
}

func (r *Runtime) sandboxDir(id string) string   { return r.path("sandboxes", id) }
func (r *Runtime) containerDir(id string) string { return r.path("containers", id) }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
