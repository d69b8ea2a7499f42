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
	RSS               *AgentRSS      `json:",omitempty"`
	Runtimes          *AgentRuntimes `json:",omitempty"`
	Pulls             *AgentPulls    `json:",omitempty"`
	Hollow            []AgentHollowRep
	// Errors are failures outside one measurement (set-up); the measurements carry their own.
	Errors []string `json:",omitempty"`
}

// AgentShape is the run's size.
type AgentShape struct {
	StartupPods, RealAgents, CreateRate, Repetitions, RSSPods int
	RuntimePods, Pulls                                        int
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

// AgentRuntimes compares the runtimes: one agent per runtime, each in a network namespace of its own, and per
// repetition Pods pods pinned to each agent in turn (the repetitions interleave the runtimes).
type AgentRuntimes struct {
	Pods int
	// ContainerdVersion is the runtime version the containerd agent's node reports.
	ContainerdVersion string `json:",omitempty"`
	// Images is how long building (or finding in the cache) and importing the pause and podserver images took,
	// before anything is timed.
	Images time.Duration
	Reps   []AgentRuntimeRep
	// Err is a set-up failure (containerd could not be started: only the process runtime is measured).
	Err string `json:",omitempty"`
}

// AgentRuntimeRep is one runtime's repetition: pods timed as AgentStartupRep's, and the CPU and memory of the
// runtime's processes while they start.
type AgentRuntimeRep struct {
	Runtime            string
	Rep, Pods, Running int
	// Lone is create → Running of one pod alone on the idle node, before the others; LoneCRI its CRI calls.
	Lone    time.Duration
	LoneCRI []AgentCRICall `json:",omitempty"`
	// P50, P99 and Max of create → Running; BindP50/BindP99 of create → bound; Delete as AgentStartupRep's;
	// SandboxesGone from the delete until containerd held no sandbox (the agent removes them after the pods
	// are gone from the API; zero for the process runtime, whose sandboxes hold no process).
	P50, P99, Max    time.Duration
	BindP50, BindP99 time.Duration
	Delete           time.Duration
	SandboxesGone    time.Duration `json:",omitempty"`
	// Window is from the first create call until the last pod was Running: what the CPU times cover.
	Window time.Duration
	// CPU seconds over the window: the agent's own; containerd's with the processes it ran and waited for (CNI
	// plugins, the shims' start commands); the shims' with the processes they waited for (runc) and their
	// children (the containers, from runc's or the process runtime's init on).
	AgentCPU, ContainerdCPU, ShimsCPU float64
	// MachineCores is how many of the machine's cores were busy on average over the window (every process:
	// user, system, interrupts); MachineSteal how many the hypervisor gave to others (steal time).
	MachineCores, MachineSteal float64
	// AgentIdleRSS is the agent's RSS before the first create; AgentPeakRSS and ContainerdPeakRSS the highest
	// of samples every 100 ms over the window.
	AgentIdleRSS, AgentPeakRSS, ContainerdPeakRSS int64
	// Shims and ShimsPSS: the runtime's shim processes once every pod ran, and their summed PSS.
	Shims    int
	ShimsPSS int64
	// CRI is, for containerd, how long its CRI calls took over the window, from its log.
	CRI []AgentCRICall `json:",omitempty"`
	Err string         `json:",omitempty"`
}

// AgentCRICall is how long containerd took to answer one kind of CRI call.
type AgentCRICall struct {
	Call          string
	Calls         int
	P50, P99, Max time.Duration
}
