package perf

import (
	"errors"
	"io"
	"log/slog"
	"time"
)

// AgentConfig is one run of the node agent harness (cmd/agentperf). Zero fields take the defaults noted.
type AgentConfig struct {
	// StartupPods is how many pods the startup scenario creates per repetition on RealAgents real agents
	// (defaults 100 and 2; negative: skip the scenario, and its agents unless RSSPods needs them), at CreateRate
	// pods/s (default 20, open loop).
	StartupPods int
	RealAgents  int
	CreateRate  int
	// Repetitions of the startup scenario (default 3); the report shows medians.
	Repetitions int
	// RSSPods is how many pods run on one real agent while its memory is read (default 100; negative: skip).
	RSSPods int
	// RuntimePods is how many pods the runtime comparison pins to each runtime's agent per repetition
	// (default 50, the issue's; negative: skip); it needs containerd (Debian's package), else only the process
	// runtime is measured.
	RuntimePods int
	// Pulls is how many pods pull their image (absent from the node) from a local registry through a containerd
	// agent of their own, one at a time, each after a `ctr images pull` of an image of the same shape (default
	// 20, issue 22's; negative: skip); it needs containerd and docker-registry (Debian's packages).
	Pulls int
	// HollowNodes hollow nodes (default 1,000; negative: skip the hollow scenario) run HollowPodsPerNode pods
	// each (default 30) from one Deployment, HollowReps times (default 1).
	HollowNodes       int
	HollowPodsPerNode int
	HollowReps        int
	// Steady is how long CPU and memory are sampled once everything runs (default 30 s).
	Steady time.Duration
	// Timeout bounds each wait for pods or nodes (default 10 min).
	Timeout time.Duration

	// Out is the markdown file whose agentperf block is (re)written (empty: none); JSONOut gets the raw results.
	Out, JSONOut string
	// Command is the reproduce command printed in the report; Quick marks a smoke run.
	Command string
	Quick   bool
	// TempDir is where the run's directory is created; removed at the end unless KeepTemp.
	TempDir  string
	KeepTemp bool
	// Binary is a prebuilt wheelhouse binary; empty builds ./cmd/wheelhouse of the repository.
	Binary string
	Logger *slog.Logger
}

// QuickAgentConfig shrinks cfg to a smoke run of under a minute.
func QuickAgentConfig(cfg AgentConfig) AgentConfig {
	cfg.Quick = true
	cfg.StartupPods, cfg.Repetitions, cfg.RSSPods, cfg.CreateRate, cfg.RuntimePods = 20, 1, 10, 40, 10
	cfg.Pulls = 3
	cfg.HollowNodes, cfg.HollowPodsPerNode, cfg.HollowReps = 20, 5, 1
	cfg.Steady = 2 * time.Second
	return cfg
}

func (cfg *AgentConfig) setDefaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&cfg.StartupPods, 100)
	def(&cfg.RealAgents, 2)
	def(&cfg.CreateRate, 20)
	def(&cfg.Repetitions, 3)
	def(&cfg.RSSPods, 100)
	def(&cfg.RuntimePods, 50)
	def(&cfg.Pulls, 20)
	def(&cfg.HollowNodes, 1000)
	def(&cfg.HollowPodsPerNode, 30)
	def(&cfg.HollowReps, 1)
	if cfg.Steady == 0 {
		cfg.Steady = 30 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports a configuration that cannot run.
func (cfg AgentConfig) Validate() error {
	switch {
	case cfg.RealAgents < 1 || cfg.RealAgents > 200:
		return errors.New("agentperf: --agents must be 1 to 200")
	case cfg.CreateRate < 1 || cfg.Repetitions < 1:
		return errors.New("agentperf: --rate and --reps must be positive")
	case cfg.HollowPodsPerNode < 1 || cfg.HollowReps < 1:
		return errors.New("agentperf: --hollow-pods and --hollow-reps must be positive")
	case cfg.HollowNodes > 10_000:
		return errors.New("agentperf: at most 10,000 hollow nodes (the agent's limit)")
	}
	return nil
}
