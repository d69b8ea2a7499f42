package perf

import "time"

// ProxyResults is everything one proxyperf run measured (the --json file).
type ProxyResults struct {
	Started, Finished time.Time
	Quick             bool
	Command           string
	Machine           Machine
	// LoadAvg is /proc/loadavg when the run started: other work on the machine shows there.
	LoadAvg string
	Shape   ProxyShape
	// Sync are the full syncs, one per mode and size; Change the one-endpoint changes, one per mode.
	Sync   []ProxySyncResult   `json:",omitempty"`
	Change []ProxyChangeResult `json:",omitempty"`
	// IPVS says whether the IPVS backend was measured (its numbers are in Sync and Change, mode ipvs).
	IPVS    *ProxyIPVSResult     `json:",omitempty"`
	Connect []ProxyConnectResult `json:",omitempty"`
	DNS     *ProxyDNSResult      `json:",omitempty"`
	// Errors are failures outside one measurement (set-up); the measurements carry their own.
	Errors []string `json:",omitempty"`
}

// ProxyShape is the run's size.
type ProxyShape struct {
	Scenarios                  []string
	SyncSizes                  []int
	SyncReps, Endpoints        int
	ChangeServices, ChangeReps int
	ConnectSamples             int
	ConnectOthers              int
	DNSServices, DNSHeadless   int
	DNSSenders                 []int
	DNSDuration                time.Duration
	Seed                       int64
}

// The proxy's modes.
const (
	modeNFT    = "nftables"            // the agent's layout: the Services over nft.DefaultShards tables
	modeNFTOne = "nftables, one table" // the same layout in one table, for comparison
	modeIPVS   = "ipvs"
)

// ProxySyncResult is the full sync of Services Services of Endpoints endpoints each into a backend that holds
// nothing, Reps times. Build is proxy.Build from the Service and EndpointSlice objects (the model), Sync the
// backend's first Sync of that state (the kernel), Total their sum: what the agent's sync loop does.
type ProxySyncResult struct {
	Mode string
	// InVM: measured in the qemu VM (software emulation), not on this machine's kernel.
	InVM                bool
	Services, Endpoints int
	// VirtualServices is the size of the state built.
	VirtualServices int
	Reps            int
	// Iterations is, for a benchmark's numbers (the VM's), how many iterations their means are of.
	Iterations  int             `json:",omitempty"`
	Build, Sync []time.Duration `json:",omitempty"`
	BuildMedian time.Duration
	SyncMedian  time.Duration
	SyncMin     time.Duration
	SyncMax     time.Duration
	TotalMedian time.Duration
	TotalMin    time.Duration
	TotalMax    time.Duration
	Err         string `json:",omitempty"`
}

// ProxyChangeResult is one endpoint replaced in one Service with Services Services programmed, Reps times (a
// different Service each time): Build is proxy.Build of every Service again (as the sync loop does), Sync the
// backend's Sync of the changed state, Total their sum.
type ProxyChangeResult struct {
	Mode                 string
	InVM                 bool
	Services, Endpoints  int
	Reps                 int
	Iterations           int `json:",omitempty"` // as ProxySyncResult's
	SyncP50, SyncP99     time.Duration
	SyncMax              time.Duration
	BuildP50, BuildP99   time.Duration
	TotalP50, TotalP99   time.Duration
	Syncs, Builds, Total []time.Duration `json:",omitempty"`
	Err                  string          `json:",omitempty"`
}

// ProxyIPVSResult says how the IPVS backend was measured, or why not.
type ProxyIPVSResult struct {
	// Runner is what ran its benchmarks (e.g. "go test -bench ^BenchmarkVM ./agents/proxy/ipvs").
	Runner string `json:",omitempty"`
	// NotMeasured is the reason nothing was measured.
	NotMeasured string        `json:",omitempty"`
	Took        time.Duration `json:",omitempty"`
	// Lines are the guest's benchmark result lines, every benchmark's (the report quotes them).
	Lines []string `json:",omitempty"`
	Err   string   `json:",omitempty"`
}

// ProxyConnectResult is connection setup from a client pod to a server pod on one node, Samples times per
// target, interleaved: directly to the pod IP and through a cluster IP, with OtherServices more Services
// programmed in the node's table.
type ProxyConnectResult struct {
	OtherServices int
	Samples       int
	Direct        ProxyLatency
	ClusterIP     ProxyLatency
	// Ratio is ClusterIP.P50 / Direct.P50.
	Ratio float64
	Err   string `json:",omitempty"`
}

// ProxyLatency is one target's connection times: TCP connect, a 5-byte request and its 5-byte answer.
type ProxyLatency struct {
	Target        string
	P50, P99, Max time.Duration
	Mean          time.Duration
	Errors        int
	FirstErr      string `json:",omitempty"`
}

// ProxyDNSResult is the cluster DNS server answering from an Index of Services Services (Headless of them
// headless with Endpoints endpoints each) over UDP on loopback.
type ProxyDNSResult struct {
	Services, Headless, Endpoints int
	CPUs                          int
	Duration                      time.Duration
	Runs                          []ProxyDNSRun
	Err                           string `json:",omitempty"`
}

// ProxyDNSRun is one query kind sent by Senders concurrent senders, each with one query outstanding, for the
// run's duration. CPU is the harness process's (server and load generator together), in cores.
type ProxyDNSRun struct {
	Kind     string
	Senders  int
	Queries  int
	Errors   int
	FirstErr string `json:",omitempty"`
	QPS      float64
	P50, P99 time.Duration
	CPU      float64
}
