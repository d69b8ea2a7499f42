package perf

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// Scheduler harness cases: the workloads of kube-scheduler's scheduler_perf that issue 5 names, at the harness's
// scale (see the report's method section for where they differ from upstream's).
const (
	// SchedPlain: pods requesting 100m CPU and 500 MiB, nothing else (SchedulingBasic's pod-default.yaml).
	SchedPlain = "plain"
	// SchedSpread: each pod also has a DoNotSchedule constraint, maxSkew 1 over the zones, on its app label
	// (TopologySpreading; upstream has maxSkew 5 over 3 zones).
	SchedSpread = "spread"
	// SchedAntiAffinity: each pod also has a required anti-affinity on kubernetes.io/hostname against the pods
	// of its group of ten (SchedulingPodAntiAffinity, in groups so that the pods can outnumber the nodes).
	SchedAntiAffinity = "anti-affinity"
	// SchedPreemption: nodes full of low-priority pods, then high-priority pods that must preempt one each
	// (in the manner of PreemptionBasic).
	SchedPreemption = "preemption"
)

// AllSchedCases is every case, in report order.
var AllSchedCases = []string{SchedPlain, SchedSpread, SchedAntiAffinity, SchedPreemption}

// SchedConfig is one run of the scheduler harness (cmd/schedperf).
type SchedConfig struct {
	// Nodes in the cluster (default 5,000) and Pods to place in the plain, spread and anti-affinity cases
	// (default 10,000).
	Nodes int
	Pods  int
	// VictimsPerNode is how many low-priority pods of one CPU fill each 4-CPU node in the preemption case
	// (default 4), and Preemptors how many high-priority pods of one CPU then have to preempt (default: Pods, at
	// most one per victim).
	VictimsPerNode int
	Preemptors     int

	// AlgoCases are measured with the algorithm alone (scheduler.Simulator); E2ECases end to end, through the
	// API with the bindings written to PostgreSQL. Default: every case for both; empty after parsing "none".
	AlgoCases []string
	E2ECases  []string
	// Repetitions of every measurement; the report shows medians (default 3).
	Repetitions int

	// DeployReplicas is the size of the Deployment whose rollout is timed from its creation until every pod is
	// bound (default 1,000; negative: skip), on DeployNodes nodes (default 100), with the controllers running.
	DeployReplicas int
	DeployNodes    int

	// Workers create the nodes and pods of an end-to-end run concurrently (default 32).
	Workers int
	// Timeout bounds the wait for the pods of one end-to-end run or rollout to be bound (default 10 minutes).
	Timeout time.Duration
	// Settle is the pause before each end-to-end measurement, so that loading's tail (PostgreSQL writing back,
	// a garbage collection) stays out of it (default 2 s; negative: none).
	Settle time.Duration

	// Out is the markdown file whose schedperf section is (re)written (empty: none); JSONOut gets the raw
	// results.
	Out     string
	JSONOut string
	// Command is the reproduce command printed in the report.
	Command string
	// Quick marks a smoke run (set by QuickSchedConfig); the report says its numbers mean nothing.
	Quick bool

	// TempDir is where the run's directory (PostgreSQL's data) is created (default os.TempDir()); it is removed
	// at the end unless KeepTemp.
	TempDir  string
	KeepTemp bool

	// CPUProfile, when set, is where a CPU profile of each end-to-end measurement (from the scheduler's start
	// until every pod is bound, nothing of the loading) is written: one file per run, named
	// CPUProfile-<case>-<rep>.
	CPUProfile string

	Logger *slog.Logger
}

// QuickSchedConfig shrinks cfg to a smoke run of about 20 seconds: one repetition at toy scale.
func QuickSchedConfig(cfg SchedConfig) SchedConfig {
	cfg.Quick = true
	cfg.Repetitions = 1
	cfg.Nodes = 50
	cfg.Pods = 100
	cfg.Preemptors = 25
	cfg.DeployReplicas = 100
	cfg.DeployNodes = 10
	cfg.Settle = 200 * time.Millisecond
	return cfg
}

func (cfg *SchedConfig) setDefaults() {
	setInt(&cfg.Nodes, 5000)
	setInt(&cfg.Pods, 10_000)
	setInt(&cfg.VictimsPerNode, 4)
	setInt(&cfg.Preemptors, min(cfg.Pods, cfg.Nodes*cfg.VictimsPerNode))
	setInt(&cfg.Repetitions, 3)
	setInt(&cfg.DeployReplicas, 1000)
	setInt(&cfg.DeployNodes, 100)
	setInt(&cfg.Workers, 32)
	setDur(&cfg.Timeout, 10*time.Minute)
	setDur(&cfg.Settle, settleTime)
	if cfg.AlgoCases == nil {
		cfg.AlgoCases = AllSchedCases
	}
	if cfg.E2ECases == nil {
		cfg.E2ECases = AllSchedCases
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports a SchedConfig that cannot work: an unknown case, or more pods than the cluster can hold.
func (cfg *SchedConfig) Validate() error {
	for _, c := range slices.Concat(cfg.AlgoCases, cfg.E2ECases) {
		if !slices.Contains(AllSchedCases, c) {
			return fmt.Errorf("perf: unknown case %q (want %v)", c, AllSchedCases)
		}
	}
	switch {
	case cfg.Nodes < 1 || cfg.Pods < 1 || cfg.Preemptors < 1 || cfg.VictimsPerNode < 1:
		return errors.New("perf: nodes, pods, preemptors and victims per node must be at least 1")
	case cfg.VictimsPerNode > schedNodeCPUs:
		return fmt.Errorf("perf: at most %d victims of one CPU fit a node", schedNodeCPUs)
	case cfg.Preemptors > cfg.Nodes*cfg.VictimsPerNode:
		return fmt.Errorf("perf: %d preemptors cannot fit %d nodes with %d victims each", cfg.Preemptors, cfg.Nodes, cfg.VictimsPerNode)
	case cfg.Pods > cfg.Nodes*schedPlainPerNode:
		return fmt.Errorf("perf: %d pods cannot fit %d nodes of %d pods (100m of 4 CPU)", cfg.Pods, cfg.Nodes, schedPlainPerNode)
	case cfg.Nodes < min(cfg.Pods, schedGroup) && cfg.runs(SchedAntiAffinity):
		return fmt.Errorf("perf: the anti-affinity case needs at least %d nodes: a group of %d pods takes one node each",
			min(cfg.Pods, schedGroup), schedGroup)
	case cfg.Repetitions < 1:
		return errors.New("perf: repetitions must be at least 1")
	case cfg.DeployReplicas > 0 && cfg.DeployReplicas > cfg.DeployNodes*schedPlainPerNode:
		return fmt.Errorf("perf: %d replicas cannot fit %d nodes of %d pods", cfg.DeployReplicas, cfg.DeployNodes, schedPlainPerNode)
	case cfg.Workers < 1:
		return errors.New("perf: workers must be at least 1")
	}
	return nil
}

// runs says whether case c is measured at all.
func (cfg *SchedConfig) runs(c string) bool {
	return slices.Contains(cfg.AlgoCases, c) || slices.Contains(cfg.E2ECases, c)
}
