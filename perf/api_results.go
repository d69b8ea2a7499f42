package perf

import "time"

// APIResults is everything one run of the API harness measured; the report is rendered from it and it can be
// saved as JSON (--json) and rendered again (apiperf report).
type APIResults struct {
	Started, Finished time.Time
	Quick             bool
	Command           string
	Shape             APIShape
	Machine           Machine
	// IdleOther is the CPU (cores) other processes used during a second before the first measurement, while the
	// harness and its servers sat idle.
	IdleOther float64
	// Targets says what each target was (server flags, protocol) and whether it could be started.
	Targets []TargetInfo
	// Protocol is the HTTP protocol each target's client negotiated ("HTTP/1.1": every watch is its own
	// TCP and TLS connection; "HTTP/2.0": watches share connections as streams).
	Protocol map[string]string
	// Reps holds every (repetition, target) in run order: repetition 1 of every target, then repetition 2, ...
	Reps []APIRep
	// Errors are failures outside a single scenario (setup, loading); the run goes on without them.
	Errors []string
	// RBAC holds the authorization benchmarks (nil when skipped).
	RBAC *RBACBench `json:",omitempty"`
}

// APIShape is the workload of a run, for the report.
type APIShape struct {
	Repetitions     int
	CreateRate      int
	CreateDuration  time.Duration
	ListPods        int
	ListRepetitions int
	Watchers        int
	WatchRate       int
	WatchDuration   time.Duration
}

// APIRep is one repetition of the three scenarios against one target.
type APIRep struct {
	Target string
	Rep    int // 1-based
	Create CreateResult
	List   ListScenario
	Watch  FanoutResult
}

// APICPU is the CPU used during a measurement, in cores (CPU seconds per second of wall time).
type APICPU struct {
	Server   float64 // the wheelhouse server process
	Postgres float64 // the postmaster and every backend
	Harness  float64 // this process: load generator and client-go
	// Other is the user and system time of every other process on the machine (the idle target's server,
	// anything else running): the machine was not the harness's alone when this is well above zero.
	Other float64
}

// CreateResult is one open-loop run of pod creates.
type CreateResult struct {
	// Scheduled is how many creates the schedule held (rate × duration); OK and Errors how they ended.
	Scheduled, OK, Errors int
	// Late counts creates that started more than lateAfter after their scheduled time; MaxLag is the worst lag.
	Late   int
	MaxLag time.Duration
	// Elapsed is from the first scheduled start until the last response.
	Elapsed time.Duration
	// P50, P99 and Max are the latencies of successful creates, from the scheduled start to the response.
	P50, P99, Max time.Duration
	CPU           APICPU
	// ServerRSS is the server's resident set at the end of the phase.
	ServerRSS int64
	FirstErr  string `json:",omitempty"`
	// Err is set when the scenario could not run at all.
	Err string `json:",omitempty"`
}

// Rate is the successful creates per second achieved.
func (c CreateResult) Rate() float64 {
	if c.Elapsed <= 0 {
		return 0
	}
	return float64(c.OK) / c.Elapsed.Seconds()
}

// ListScenario is the timed lists of one repetition.
type ListScenario struct {
	Pods  int
	Forms []ListForm
	// ServerRSS is the server's resident set after every list of the repetition.
	ServerRSS int64
	Err       string `json:",omitempty"`
}

// form returns the result of the list form named key.
func (l ListScenario) form(key string) (ListForm, bool) {
	for _, f := range l.Forms {
		if f.Key == key {
			return f, true
		}
	}
	return ListForm{}, false
}

// ListForm is the timed lists of one request form.
type ListForm struct {
	Key string
	// Durations of the timed lists (after one untimed warm-up); a paged list counts as one, every page included.
	Durations []time.Duration
	// Bytes is the size of one response (all pages of a paged list); Pages how many requests one list took.
	Bytes int64
	Pages int
	// Items is how many pods (or table rows) the warm-up list returned, a check that every pod was listed.
	Items int
	// ServerCPU is the server's CPU seconds per timed list; OtherCPU the cores other processes used meanwhile.
	ServerCPU float64
	OtherCPU  float64
	Err       string `json:",omitempty"`
}

// FanoutResult is one run of the watch fan-out scenario.
type FanoutResult struct {
	Watchers int
	// Setup is the time from opening the first watch until every watch delivered a sentinel write.
	Setup time.Duration
	// Writes succeeded at Rate per second; WriteErrors failed.
	Writes, WriteErrors int
	Rate                float64
	// Expected is Watchers × Writes; Received how many of those events the watchers got.
	Expected, Received int
	// ClosedEarly counts watches that ended before the scenario did.
	ClosedEarly int
	// P50, P99 and Max are delivery latencies: receipt in a watcher minus the write's send time.
	P50, P99, Max time.Duration
	// WriteP50 and WriteP99 are the writes' own latencies, for comparison.
	WriteP50, WriteP99 time.Duration
	// CPU is measured from the first write until the last delivery (or the drain timeout).
	CPU       APICPU
	ServerRSS int64
	FirstErr  string `json:",omitempty"`
	Err       string `json:",omitempty"`
}
