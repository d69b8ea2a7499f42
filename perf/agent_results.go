package perf

import "time"

// AgentResults is everything one agentperf run measured (the --json file).
type AgentResults struct {
	Started, Finished time.Time
	Quick             bool
	Command           string
	Machine           Machine
	Version           string
	Shape             AgentShape
	Startup           []AgentStartupRep
	RSS               *AgentRSS `json:",omitempty"`
	Hollow            []AgentHollowRep
	// Errors are failures outside one measurement (set-up); the measurements carry their own.
	Errors []string `json:",omitempty"`
}

// AgentShape is the run's size.
type AgentShape struct {
	StartupPods, RealAgents, CreateRate, Repetitions, RSSPods int
	HollowNodes, HollowPodsPerNode, HollowReps                int
	Steady                                                    time.Duration
}

// AgentStartupRep is one repetition of the pod startup scenario: pods created at a fixed rate, scheduled onto
// the real agents, each timed from the start of its create call until a watch shows it Running with every
// container started (upstream's pod startup latency, which also excludes image pulls: the process runtime
// pulls nothing).
type AgentStartupRep struct {
	Rep, Pods, Running int
	// P50, P99 and Max of create → Running; BindP50/BindP99 of create → bound (the scheduler's share).
	P50, P99, Max    time.Duration
	BindP50, BindP99 time.Duration
	// Delete is how long deleting them all took until the last was gone (the agents stop the processes).
	Delete time.Duration
	Err    string `json:",omitempty"`
}

// AgentRSS is the memory of one real agent, idle and with Pods pods running on it, and of the runtime's
// shims (one process per container).
type AgentRSS struct {
	Pods, Running int
	IdleRSS, RSS  int64
	// Cores is the agent's CPU while its pods run steadily.
	Cores float64
	// Shims and ShimPSS: the shim processes and their summed proportional set size.
	Shims   int
	ShimPSS int64
	Err     string `json:",omitempty"`
}

// AgentUsage is CPU (cores, averaged over the window) and memory (median of one-second samples).
type AgentUsage struct {
	ServerCores, PostgresCores, HollowCores, OtherCores float64
	ServerRSS, HollowRSS                                int64
}

// AgentHollowRep is one repetition of the hollow scenario.
type AgentHollowRep struct {
	Rep, Nodes, Pods, Running int
	// NodesReady is from the hollow agent's start until every node is Ready (first repetition only).
	NodesReady time.Duration `json:",omitempty"`
	// Idle is the steady state with the nodes heartbeating and no pods; Loaded with every pod Running.
	Idle, Loaded AgentUsage
	// AllRunning is from the Deployment's create until the last pod is Running; P50/P99 per pod from its
	// ADDED event to Running.
	AllRunning time.Duration
	P50, P99   time.Duration
	Err        string `json:",omitempty"`
}
