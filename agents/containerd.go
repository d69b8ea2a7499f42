package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/agents/kubelet"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri"
	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/cri/managed"
)

// ManagedContainerdDir is the directory, under the agent's data dir, of the containerd the agent runs itself.
const ManagedContainerdDir = "containerd"

// answerTimeout bounds the check for a system containerd on the default socket.
const answerTimeout = 2 * time.Second

// containerd is the containerd the agent uses (--runtime containerd): where it answers, where its CNI
// configuration goes, and, for one the agent runs, how to stop it.
type containerd struct {
	endpoint, cniConfDir string
	// stop stops a containerd the agent runs and waits until it has exited; a no-op for another's.
	stop func()
}

// useContainerd picks the containerd: --containerd-endpoint when given; else the system's, when one answers on
// cri.DefaultEndpoint; else one the agent runs as its child under <data-dir>/containerd (agents/runtime/cri/managed),
// supervised until stop, with its CNI configuration there too (a system containerd's /etc/cni/net.d is left
// alone). It says in the log which one is used, and waits for one it starts to be ready (or to fail to start).
func useContainerd(ctx context.Context, cfg Config, regs nodeRegistries, log *slog.Logger) (containerd, error) {
	noop := func() {}
	if cfg.ContainerdEndpoint != "" {
		log.Info("using containerd", "endpoint", cfg.ContainerdEndpoint, "managed", false)
		return containerd{endpoint: cfg.ContainerdEndpoint, cniConfDir: cfg.cniConfDir(), stop: noop}, nil
	}
	system := strings.TrimPrefix(cri.DefaultEndpoint, "unix://")
	if managed.Answers(ctx, system, answerTimeout) {
		log.Info("using the system's containerd", "endpoint", cri.DefaultEndpoint, "managed", false)
		return containerd{endpoint: cri.DefaultEndpoint, cniConfDir: cfg.cniConfDir(), stop: noop}, nil
	}
	m, err := managed.New(managed.Config{Dir: filepath.Join(cfg.DataDir, ManagedContainerdDir),
		PauseImage: cmp.Or(cfg.PauseImage, kubelet.DefaultSandboxImage), RegistryConfigPath: regs.dir,
		RegistryAuths: regs.managedAuths(), Logger: log})
	if err != nil {
		return containerd{}, fmt.Errorf("agent: no containerd answers on %s and the agent cannot run one: %w", cri.DefaultEndpoint, err)
	}
	log.Info("no containerd answers on the default socket; running one", "endpoint", m.Socket(), "managed", true,
		"root", m.Root(), "state", m.State())
	// Not ctx: containerd stays up until the agent has finished with it (stop, on the way out).
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- m.Start(mctx) }()
	stop := func() {
		cancel()
		<-done
	}
	select {
	case <-m.Ready():
	case err := <-done:
		cancel()
		return containerd{}, fmt.Errorf("agent: running containerd: %w", err)
	case <-ctx.Done():
		stop()
		return containerd{}, ctx.Err()
	}
	return containerd{endpoint: m.Socket(), cniConfDir: m.CNIConfDir(), stop: stop}, nil
}

// cniConfDir is the CNI configuration directory of a containerd the agent does not run.
func (c Config) cniConfDir() string {
	if c.CNIConfDir != "" {
		return c.CNIConfDir
	}
	return DefaultCNIConfDir
}

// cleanupManagedContainerd removes the agent's pods from the containerd the agent runs under dataDir (when it has
// run one there): it starts it, removes the sandboxes the agent made and stops it again; a containerd of that
// directory left running is stopped first (managed.Containerd.Start).
func cleanupManagedContainerd(ctx context.Context, dataDir string, log *slog.Logger) error {
	dir := filepath.Join(dataDir, ManagedContainerdDir)
	if _, err := os.Stat(filepath.Join(dir, "config.toml")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	m, err := managed.New(managed.Config{Dir: dir, PauseImage: kubelet.DefaultSandboxImage, Logger: log})
	if err != nil {
		return err
	}
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- m.Start(mctx) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-m.Ready():
	case err := <-done:
		done <- err // for the deferred wait
		return fmt.Errorf("starting the agent's containerd: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	return removeOwnSandboxes(ctx, m.Socket(), log)
}

// removeOwnSandboxes removes the agent's pods from the containerd at socket.
func removeOwnSandboxes(ctx context.Context, socket string, log *slog.Logger) error {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	r, err := cri.Open(octx, cri.Config{Endpoint: socket, Logger: log})
	cancel()
	if err != nil {
		return err
	}
	n, rerr := r.RemoveOwnSandboxes(ctx)
	log.Info("removed the agent's pods from containerd", "endpoint", socket, "sandboxes", n)
	return errors.Join(rerr, r.Close())
}
