package perf

import "time"

// Results is everything one run measured; the report is rendered from it and it can be saved as JSON.
type Results struct {
	Started, Finished time.Time
	Quick             bool
	Command           string
	// PointDuration and Repetitions are the throughput points' shape.
	PointDuration time.Duration
	Repetitions   int
	WatchDuration time.Duration
	Machine       Machine
	Targets       []TargetInfo
	Writes        []WritePoint
	Diagnostics   []Diagnosis
	Watch         []WatchResult
	Lists         []ListResult
	Memory        []MemoryResult
	// Errors are failures of single measurements; the run goes on without them.
	Errors []string
}

// TargetInfo says what a target was and whether it could be measured.
type TargetInfo struct {
	Name    string
	Version string
	Setup   string // how it ran: endpoint, database, notable settings
	Err     string // non-empty: the target could not be started, and why
}

// Operation names of the throughput phase.
const (
	OpCreate = "create"
	OpUpdate = "update"
)

// WritePoint is one (target, operation, concurrency) throughput point over its repetitions.
type WritePoint struct {
	Target      string
	Op          string
	Concurrency int
	Reps        []WriteRep
}

// WriteRep is one repetition of a throughput point.
type WriteRep struct {
	OK, Failed int
	Elapsed    time.Duration
	// P50 and P99 are the per-operation latencies of successful writes.
	P50, P99 time.Duration
	// CPU is each component's average CPU use in cores: "harness" (load generator, etcd client and the
	// in-process store), "postgres" (every PostgreSQL process) and the target's own server.
	CPU map[string]float64
	// Background is PostgreSQL's own work during the repetition (for every target: they share the machine).
	Background Background
	FirstErr   string `json:",omitempty"`
}

// Rate is successful operations per second.
func (r WriteRep) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// MedianRate is the median of the repetitions' rates.
func (p WritePoint) MedianRate() float64 {
	rates := make([]float64, len(p.Reps))
	for i, r := range p.Reps {
		rates[i] = r.Rate()
	}
	return median(rates)
}

// medianRep is the repetition whose rate is the median (the lower middle one for an even count).
func (p WritePoint) medianRep() WriteRep {
	if len(p.Reps) == 0 {
		return WriteRep{}
	}
	best := p.Reps[0]
	m := p.MedianRate()
	for _, r := range p.Reps {
		if abs(r.Rate()-m) < abs(best.Rate()-m) {
			best = r
		}
	}
	return best
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// WatchResult is the cross-process watch latency of one target over its repetitions.
type WatchResult struct {
	Target string
	Reps   []WatchRep
}

// WatchRep is one repetition of the watch-latency phase.
type WatchRep struct {
	// Writes is how many writes succeeded and Rate the rate achieved; Received how many events the other
	// process got.
	Writes   int
	Rate     float64
	Received int
	// P50, P99 and Max are delivery time in the watching process minus the write's start time.
	P50, P99, Max time.Duration
	// WriteP50 and WriteP99 are the writes' own latencies (start to acknowledged commit), for comparison.
	WriteP50, WriteP99 time.Duration
	Background         Background
	Err                string `json:",omitempty"`
}

// ok are the repetitions that completed.
func (w WatchResult) ok() []WatchRep {
	var out []WatchRep
	for _, r := range w.Reps {
		if r.Err == "" {
			out = append(out, r)
		}
	}
	return out
}

// median of one latency over the completed repetitions.
func (w WatchResult) median(f func(WatchRep) time.Duration) time.Duration {
	var ds []time.Duration
	for _, r := range w.ok() {
		ds = append(ds, f(r))
	}
	return medianDuration(ds)
}

// ListResult is one list size of one target.
type ListResult struct {
	Target    string
	Objects   int
	Durations []time.Duration
	Err       string `json:",omitempty"`
}

// MemoryResult is the memory of the process serving the watches, with the objects loaded and the watches open.
type MemoryResult struct {
	Target  string
	Objects int
	Watches int
	// Process says whose RSS ServerRSS is.
	Process   string
	ServerRSS int64
	// WatcherRSS is the RSS of the process holding the watches (for wheelhouse the same process as ServerRSS).
	WatcherRSS int64
	// WatcherHeap is the Go heap in use in the watching process (runtime/metrics), for wheelhouse the store's.
	WatcherHeap int64
	// PostgresPSS is the proportional set size of every PostgreSQL process, for the targets that need it.
	PostgresPSS int64
	// DataBytes is the size of the target's data: etcd's backend database, the PostgreSQL database.
	DataBytes int64
	Err       string `json:",omitempty"`
}
