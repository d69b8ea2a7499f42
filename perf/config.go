package perf

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// Target names.
const (
	Wheelhouse = "wheelhouse"
	Etcd       = "etcd"
	Kine       = "kine"
)

// AllTargets is every system the harness can compare, in report order.
var AllTargets = []string{Wheelhouse, Etcd, Kine}

// Config is one harness run.
type Config struct {
	// Targets to measure (default AllTargets). Ratios need wheelhouse plus the other.
	Targets []string
	// Concurrency lists the numbers of concurrent writers (default 1, 16, 64).
	Concurrency []int
	// PointDuration is how long each throughput point writes (default 5 s).
	PointDuration time.Duration
	// Repetitions of each throughput point and list; the report shows the median (default 3).
	Repetitions int
	// ListRepetitions of each list size (default 5).
	ListRepetitions int
	// KeysPerWriter is how many objects each writer cycles through in the update phase (default 16).
	KeysPerWriter int
	// WatchRate is the write rate of the watch-latency phase, in writes/s (default 1000).
	WatchRate int
	// WatchDuration is how long the watch-latency phase writes (default 10 s).
	WatchDuration time.Duration
	// ListSizes are the object counts listed (default 10,000 and 100,000); the largest is also the memory phase's.
	ListSizes []int
	// Watches is how many watches are open in the memory phase (default 1,000).
	Watches int
	// NoDiagnose skips the extra, unmeasured run of each PostgreSQL-backed throughput point with
	// pg_stat_statements and wait-event sampling.
	NoDiagnose bool

	// Out is the markdown report path (empty: none). JSONOut, if set, also gets the raw results.
	Out     string
	JSONOut string
	// Command is the reproduce command printed in the report.
	Command string
	// Quick marks a smoke run (set by QuickConfig); the report says its numbers mean nothing.
	Quick bool

	// TempDir is where data directories are created (default os.TempDir()); everything is removed at the end
	// unless KeepTemp.
	TempDir  string
	KeepTemp bool
	// CacheDir holds the kine binary between runs (default .cache under the repository root).
	CacheDir string
	// InstallEtcd lets the harness apt-get install etcd-server when it is missing and it runs as root.
	InstallEtcd bool
	// PGSettings are extra PostgreSQL settings (on top of pgSettings).
	PGSettings map[string]string
	// WatcherCommand starts a copy of this program in watcher mode (default: this executable, "watcher").
	WatcherCommand []string

	Logger *slog.Logger
}

// QuickConfig returns cfg shrunk to a smoke run: every measurement once, at tiny scale.
func QuickConfig(cfg Config) Config {
	cfg.Quick = true
	cfg.PointDuration = time.Second
	cfg.Repetitions = 1
	cfg.ListRepetitions = 3
	cfg.WatchDuration = time.Second
	cfg.ListSizes = []int{1000}
	cfg.Watches = 50
	cfg.KeysPerWriter = 4
	return cfg
}

func (cfg *Config) setDefaults() {
	if len(cfg.Targets) == 0 {
		cfg.Targets = AllTargets
	}
	if len(cfg.Concurrency) == 0 {
		cfg.Concurrency = []int{1, 16, 64}
	}
	setDur(&cfg.PointDuration, 5*time.Second)
	setDur(&cfg.WatchDuration, 10*time.Second)
	setInt(&cfg.Repetitions, 3)
	setInt(&cfg.ListRepetitions, 5)
	setInt(&cfg.KeysPerWriter, 16)
	setInt(&cfg.WatchRate, 1000)
	setInt(&cfg.Watches, 1000)
	if len(cfg.ListSizes) == 0 {
		cfg.ListSizes = []int{10_000, 100_000}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

func setDur(v *time.Duration, d time.Duration) {
	if *v == 0 {
		*v = d
	}
}

func setInt(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

// Validate reports a Config that cannot work.
func (cfg *Config) Validate() error {
	for _, t := range cfg.Targets {
		if !slices.Contains(AllTargets, t) {
			return fmt.Errorf("perf: unknown target %q (want %v)", t, AllTargets)
		}
	}
	for _, c := range cfg.Concurrency {
		if c < 1 {
			return fmt.Errorf("perf: concurrency %d must be at least 1", c)
		}
	}
	for _, n := range cfg.ListSizes {
		if n < 1 {
			return fmt.Errorf("perf: list size %d must be at least 1", n)
		}
	}
	switch {
	case cfg.PointDuration < 100*time.Millisecond || cfg.WatchDuration < 100*time.Millisecond:
		return errors.New("perf: durations must be at least 100ms")
	case cfg.Repetitions < 1 || cfg.ListRepetitions < 1 || cfg.KeysPerWriter < 1:
		return errors.New("perf: repetitions and keys per writer must be at least 1")
	case cfg.WatchRate < 1 || cfg.Watches < 1:
		return errors.New("perf: watch rate and watches must be at least 1")
	case cfg.CacheDir == "" && slices.Contains(cfg.Targets, Kine):
		return errors.New("perf: CacheDir is required to build kine")
	}
	return nil
}
