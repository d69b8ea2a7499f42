package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"
)

// Network wires a sandbox's network namespace to the node's pod network. It
// is supplied by the consumer (agents/network); nil means no pod network:
// sandboxes get a bare namespace with only lo up.
type Network interface {
	// SetUp connects the namespace at netnsPath and returns the pod's IP.
	SetUp(ctx context.Context, sandboxID, netnsPath string) (podIP string, err error)
	// TearDown disconnects it; it must succeed when nothing is set up.
	TearDown(ctx context.Context, sandboxID, netnsPath string) error
}

// Config configures the process runtime. Zero fields take the defaults
// documented on them.
type Config struct {
	// StateDir holds the runtime's state (required); it must survive agent
	// restarts for running containers to be re-adopted.
	StateDir string
	// LogDir is where container logs go when a sandbox has no
	// LogDirectory (default StateDir/logs).
	LogDir string
	// CgroupRoot is the cgroup under which pods are placed. An absolute path
	// is from the hierarchy's root ("/wheelhouse": /sys/fs/cgroup/wheelhouse
	// on v2, /sys/fs/cgroup/<controller>/wheelhouse on v1); a relative one is
	// below the agent's own cgroup. Default "/wheelhouse".
	CgroupRoot string
	// PodPidsLimit is written to each pod cgroup's pids.max (0: unlimited).
	PodPidsLimit int64
	// Network sets up pod networking; nil: bare namespaces.
	Network Network
	// StreamAddr is the address of the streaming server for exec, attach and
	// port-forward: "host:port" (default "127.0.0.1:0") or "unix:/path".
	StreamAddr string
	// LogMaxBytes is the size at which a container log is rotated (default 10 MiB).
	LogMaxBytes int64
	// LogMaxFiles is how many log files are kept per container, the live one
	// included (default 5).
	LogMaxFiles int
	// StopGrace bounds how long after SIGKILL a stop waits for the exit to be
	// recorded (default 10 s).
	StopGrace time.Duration
	// Logger receives the runtime's logs (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// ErrInvalidConfig is wrapped by Validate's errors.
var ErrInvalidConfig = errors.New("process runtime: invalid config")

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.LogDir == "" && c.StateDir != "" {
		c.LogDir = filepath.Join(c.StateDir, "logs")
	}
	if c.CgroupRoot == "" {
		c.CgroupRoot = "/wheelhouse"
	}
	if c.StreamAddr == "" {
		c.StreamAddr = "127.0.0.1:0"
	}
	if c.LogMaxBytes == 0 {
		c.LogMaxBytes = 10 << 20
	}
	if c.LogMaxFiles == 0 {
		c.LogMaxFiles = 5
	}
	if c.StopGrace == 0 {
		c.StopGrace = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports whether c (after defaults) is usable.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.StateDir == "" || !filepath.IsAbs(c.StateDir):
		return fmt.Errorf("%w: StateDir %q must be an absolute path", ErrInvalidConfig, c.StateDir)
	case !filepath.IsAbs(c.LogDir):
		return fmt.Errorf("%w: LogDir %q must be an absolute path", ErrInvalidConfig, c.LogDir)
	case c.LogMaxBytes < 1024:
		return fmt.Errorf("%w: LogMaxBytes %d is below 1 KiB", ErrInvalidConfig, c.LogMaxBytes)
	case c.LogMaxFiles < 1:
		return fmt.Errorf("%w: LogMaxFiles %d is below 1", ErrInvalidConfig, c.LogMaxFiles)
	case c.PodPidsLimit < 0:
		return fmt.Errorf("%w: PodPidsLimit %d is negative", ErrInvalidConfig, c.PodPidsLimit)
	}
	return nil
}
