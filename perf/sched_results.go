package perf

import "time"

// SchedResults is everything one run of the scheduler harness measured; the report is rendered from it and it
// can be saved as JSON (--json) and rendered again (schedperf report).
type SchedResults struct {
	Started, Finished time.Time
	Quick             bool
	Command           string
	Shape             SchedShape
	Machine           Machine
	// Postgres is the server version the end-to-end runs wrote to.
	Postgres string `json:",omitempty"`
	// IdleOther is the CPU (cores) other processes used during a second before the first measurement.
	IdleOther float64
	// Algo holds every algorithm-alone run, E2E every end-to-end run, Deploy every Deployment rollout, in run
	// order.
	Algo   []SchedRun
	E2E    []SchedRun
	Deploy []DeployRun
}

// SchedShape is the workload of a run, for the report.
type SchedShape struct {
	Nodes, Pods, VictimsPerNode, Preemptors int
	Repetitions                             int
	AlgoCases, E2ECases                     []string
	DeployReplicas, DeployNodes             int
	Workers                                 int
	// Parallelism, PercentageOfNodesToScore and InitialBackoff (podInitialBackoffSeconds) are the scheduler
	// configuration's (the defaults).
	Parallelism              int
	PercentageOfNodesToScore int
	InitialBackoff           time.Duration
}

// SchedRun is one case measured once, with the algorithm alone or end to end.
type SchedRun struct {
	Case string
	Rep  int // 1-based
	// Pods is how many pods were to be placed; Scheduled how many were (bound, end to end).
	Pods, Scheduled int
	// Elapsed is the scheduling time: from the first cycle (algorithm) or from starting the scheduler, which
	// then syncs its caches (end to end), until the last pod was placed or bound.
	Elapsed time.Duration
	// FirstBind is, end to end, the time from starting the scheduler to its first binding (its cache sync).
	FirstBind time.Duration `json:",omitempty"`
	// Cycles is how many scheduling cycles the algorithm ran (a preemptor takes two: preempt, then place);
	// Preemptions how many cycles nominated a node after evicting Victims pods.
	Cycles, Preemptions, Victims int `json:",omitempty"`
	// Heap is the heap in use after a garbage collection with every node and pod placed, minus the same
	// before the simulation was built (algorithm alone only); HeapLive the same for live objects (HeapAlloc).
	Heap, HeapLive int64 `json:",omitempty"`
	// Setup is, end to end, how long creating the nodes and pods through the API took (not measured time).
	Setup time.Duration `json:",omitempty"`
	// Confirmed is, end to end, how many of the pods a final list from the API showed with spec.nodeName set.
	Confirmed int `json:",omitempty"`
	// CPU is the CPU used while scheduling, in cores.
	CPU SchedCPU
	// Warnings are what the API and the scheduler logged at warning level or above (end to end).
	Warnings []SchedWarning `json:",omitempty"`
	Err      string         `json:",omitempty"`
}

// Rate is pods placed per second.
func (r SchedRun) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Scheduled) / r.Elapsed.Seconds()
}

// BindRate is, end to end, the pods bound after the first one per second from the first binding to the last:
// the rate once the scheduler has loaded its caches (0 when it cannot be told).
func (r SchedRun) BindRate() float64 {
	busy := r.Elapsed - r.FirstBind
	if r.FirstBind <= 0 || busy <= 0 || r.Scheduled < 2 {
		return 0
	}
	return float64(r.Scheduled-1) / busy.Seconds()
}

// ok says whether the run placed every pod without an error.
func (r SchedRun) ok() bool { return r.Err == "" && r.Scheduled == r.Pods && r.Pods > 0 }

// SchedCPU is CPU use in cores (CPU seconds per second of wall time).
type SchedCPU struct {
	// Harness is this process: the scheduler, and end to end also the API, its watch cache and the store.
	Harness  float64
	Postgres float64 `json:",omitempty"`
	// Other is every other process on the machine.
	Other float64
}

// DeployRun is one rollout of a Deployment from its creation until every pod is bound.
type DeployRun struct {
	Rep            int
	Replicas       int
	Nodes          int
	Created, Bound int
	// AllCreated is when the last pod was created, AllBound when the last was bound, both from the create
	// call of the Deployment.
	AllCreated, AllBound time.Duration
	// BindP50 and BindP99 are the pods' times from their creation to their binding.
	BindP50, BindP99 time.Duration
	Setup            time.Duration
	CPU              SchedCPU
	// Warnings are what the API, the controllers and the scheduler logged at warning level or above.
	Warnings []SchedWarning `json:",omitempty"`
	Err      string         `json:",omitempty"`
}

func (d DeployRun) ok() bool { return d.Err == "" && d.Bound == d.Replicas && d.Replicas > 0 }
