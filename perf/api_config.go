package perf

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// API harness target names: the same server binary with and without its watch cache.
const (
	APIWheelhouse = "wheelhouse"         // --watch-cache on (the default)
	APINoCache    = "wheelhouse-nocache" // --watch-cache off: every read from PostgreSQL
)

// AllAPITargets is every API target, in report order.
var AllAPITargets = []string{APIWheelhouse, APINoCache}

// APIConfig is one run of the Kubernetes API harness (cmd/apiperf).
type APIConfig struct {
	// Targets to measure (default AllAPITargets).
	Targets []string
	// Repetitions of every scenario; targets are interleaved within each repetition and the report shows the
	// median of the repetitions (default 3).
	Repetitions int

	// CreateRate is the open-loop rate of pod creates, per second (default 500), for CreateDuration (default 10 s).
	CreateRate     int
	CreateDuration time.Duration

	// ListPods is how many pods the list scenario's namespace holds (default 10,000); ListRepetitions is how many
	// timed lists of each form follow one warm-up (default 5).
	ListPods        int
	ListRepetitions int

	// Watchers is how many watches the fan-out scenario opens (default 1,000); WatchRate is its open-loop write
	// rate, per second (default 100), for WatchDuration (default 10 s).
	Watchers      int
	WatchRate     int
	WatchDuration time.Duration

	// Out is the markdown file whose apiperf section is (re)written (empty: none); JSONOut gets the raw results.
	Out     string
	JSONOut string
	// Command is the reproduce command printed in the report.
	Command string
	// Quick marks a smoke run (set by QuickAPIConfig); the report says its numbers mean nothing.
	Quick bool

	// TempDir is where the run's directory is created (default os.TempDir()); it is removed at the end unless
	// KeepTemp.
	TempDir  string
	KeepTemp bool
	// Binary is a prebuilt wheelhouse binary; empty builds ./cmd/wheelhouse of the repository once per run.
	Binary string
	// RBACCount is how often each authorization benchmark runs after the API scenarios (default 3; negative:
	// skip them).
	RBACCount int

	Logger *slog.Logger
}

// QuickAPIConfig shrinks cfg to a smoke run of well under a minute: one repetition of everything at toy scale.
func QuickAPIConfig(cfg APIConfig) APIConfig {
	cfg.Quick = true
	cfg.Repetitions = 1
	cfg.CreateRate = 100
	cfg.CreateDuration = 2 * time.Second
	cfg.ListPods = 500
	cfg.ListRepetitions = 3
	cfg.Watchers = 50
	cfg.RBACCount = -1
	cfg.WatchRate = 20
	cfg.WatchDuration = 2 * time.Second
	return cfg
}

func (cfg *APIConfig) setDefaults() {
	if cfg.RBACCount == 0 {
		cfg.RBACCount = 3
	}
	if len(cfg.Targets) == 0 {
		cfg.Targets = AllAPITargets
	}
	setInt(&cfg.Repetitions, 3)
	setInt(&cfg.CreateRate, 500)
	setDur(&cfg.CreateDuration, 10*time.Second)
	setInt(&cfg.ListPods, 10_000)
	setInt(&cfg.ListRepetitions, 5)
	setInt(&cfg.Watchers, 1000)
	setInt(&cfg.WatchRate, 100)
	setDur(&cfg.WatchDuration, 10*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports an APIConfig that cannot work.
func (cfg *APIConfig) Validate() error {
	if len(cfg.Targets) == 0 {
		return errors.New("no targets")
	}
	for _, t := range cfg.Targets {
		if !slices.Contains(AllAPITargets, t) {
			return fmt.Errorf("unknown target %q (want %v)", t, AllAPITargets)
		}
	}
	switch {
	case cfg.Repetitions < 1 || cfg.ListRepetitions < 1:
		return errors.New("repetitions must be at least 1")
	case cfg.CreateRate < 1 || cfg.WatchRate < 1:
		return errors.New("rates must be at least 1 per second")
	case cfg.CreateDuration < 100*time.Millisecond || cfg.WatchDuration < 100*time.Millisecond:
		return errors.New("durations must be at least 100ms")
	case cfg.ListPods < 1 || cfg.Watchers < 1:
		return errors.New("--pods and --watchers must be at least 1")
	}
	return nil
}
