package perf

import "time"

// DashResults is everything one dashperf run measured (the --json file).
type DashResults struct {
	Started, Finished time.Time
	Quick             bool
	Command           string
	Machine           Machine
	Version           string
	// LoadAvg is /proc/loadavg when the run started: other work on the machine shows there.
	LoadAvg string
	Shape   DashShape
	Latency *DashLatencyResult `json:",omitempty"`
	Tabs    *DashTabsResult    `json:",omitempty"`
	Page    *DashPageResult    `json:",omitempty"`
	// Errors are failures outside one measurement (set-up); the measurements carry their own.
	Errors []string `json:",omitempty"`
}

// DashShape is the run's size.
type DashShape struct {
	Scenarios                         []string
	LatencySamples, LatencyPods       int
	GapMin, GapMax                    time.Duration
	PagePods, PageReps, CreateWorkers int
	Tabs, ChurnPods, ChurnRate        int
	ChurnDuration                     time.Duration
	Seed                              int64
}

// DashLatencyResult is the write-to-DOM scenario: pods created one at a time through the API while headless
// Chromium shows the pods page of their namespace; each timed from the start of its create call until a
// MutationObserver in the page saw its row.
type DashLatencyResult struct {
	Browser string
	// Visibility is document.visibilityState of the measured page (a hidden tab pauses its live updates).
	Visibility string
	// ClockOffset is the page's clock (performance.timeOrigin + performance.now()) minus the harness's, measured
	// over the DevTools connection with an uncertainty of ClockRTT/2; the latencies are corrected by it.
	ClockOffset, ClockRTT time.Duration
	// ClockDrift is the offset measured at the end minus the one at the start.
	ClockDrift    time.Duration
	Samples, Seen int
	// P50, P99 and Max of create start → row in the DOM.
	P50, P99, Max time.Duration
	// The parts: the create call (start → response), create start → the fragment's message event in the page,
	// and that event → the row in the DOM (parsing, the swap, the observer).
	CreateP50, CreateP99 time.Duration
	FrameP50, FrameP99   time.Duration
	DOMP50, DOMP99       time.Duration
	// Coalesced counts samples whose fragment came less than the coalescing interval (plus 10 ms) after the
	// page's previous fragment: their render waited for the interval.
	Coalesced int
	Runs      []DashLatencySample `json:",omitempty"`
	Err       string              `json:",omitempty"`
}

// DashLatencySample is one write. Gap is the random pause before it; Frame and DOM are from the create call's
// start (corrected for the clock offset); SincePrevFrame is the time between the page's previous fragment and
// the one that carried the row.
type DashLatencySample struct {
	Name                    string
	Gap, Create, Frame, DOM time.Duration
	SincePrevFrame          time.Duration
}

// DashPageResult is the pods page of one namespace holding many pods, fetched over HTTPS keep-alive with a
// signed-in session cookie.
type DashPageResult struct {
	Pods int
	// Load is how long creating the pods took; Proto is the HTTP protocol of the timed requests.
	Load     time.Duration
	Proto    string
	Variants []DashPageVariant
	// ServerRSS after the timed requests.
	ServerRSS int64
	Err       string `json:",omitempty"`
}

// DashPageVariant is one page URL, fetched Reps times after an untimed warm-up. Total is from the request's
// start until the whole body is read; TTFB until its first byte (the list has been filtered, sorted and paged
// by then, the page not yet fully rendered).
type DashPageVariant struct {
	Key, Label, Query string
	Rows, Bytes, Reps int
	Median, P99, Max  time.Duration
	TTFBMedian        time.Duration
	TTFBP99           time.Duration
	CPU               APICPU
	Durations         []time.Duration `json:",omitempty"`
	Err               string          `json:",omitempty"`
}

// DashTabsResult is the connected-tabs scenario: memory per tab, then pod churn with every tab reading.
type DashTabsResult struct {
	Tabs, Connected, Pods int
	// Memory of the server before the tabs connected and after each had its first fragment: RSS, and the Go
	// heap in use after a forced collection (the profiler's MemStats) with the goroutine count.
	RSSBefore, RSSAfter               int64
	HeapBefore, HeapAfter             int64
	GoroutinesBefore, GoroutinesAfter int
	ConnectTook                       time.Duration

	// The churn: Rate changes/s asked for Duration; what was done.
	Rate             int
	Duration         time.Duration
	Creates, Deletes int
	// Skipped changes: a delete whose oldest pod's create had not returned yet, or a change over the in-flight
	// bound (the server did not keep up).
	Skipped, Failed int
	FirstErr        string `json:",omitempty"`
	// CPU over the window (cores) and the server's RSS (median and largest of one-second samples).
	CPU               APICPU
	RSSMedian, RSSMax int64
	// Per tab and second over the window: fragments, payload bytes (the messages, uncompressed) and wire bytes
	// (TLS records of permessage-deflate frames); the median tab and the busiest tab.
	FramesMedian, FramesMax   float64
	PayloadMedian, WireMedian float64
	// Change-to-frame latency over every tab: create start → the first fragment of that tab naming the pod.
	LatencyP50, LatencyP99, LatencyMax time.Duration
	// LatencySamples measured of LatencyExpected (creates in the window × tabs).
	LatencySamples, LatencyExpected int
	// WatchP50 and WatchP99 are of create start → ADDED on one API watch of the namespace (served by the watch
	// cache the regions render from), WatchSamples how many creates it saw.
	WatchP50, WatchP99 time.Duration
	WatchSamples       int
	// TabErrors counts tabs that ended early (a gone or bye, a read error).
	TabErrors   int
	FirstTabErr string `json:",omitempty"`
	Err         string `json:",omitempty"`
}
