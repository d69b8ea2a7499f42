package report

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Counts are the tests of one SIG, or of all, by status.
type Counts struct {
	Total, Passed, Failed, Skipped, NotRun int
}

func (c *Counts) add(s Status) {
	c.Total++
	switch s {
	case StatusPassed:
		c.Passed++
	case StatusFailed:
		c.Failed++
	case StatusSkipped:
		c.Skipped++
	case StatusNotRun:
		c.NotRun++
	}
}

// SIGCounts are the counts of one SIG.
type SIGCounts struct {
	SIG string
	Counts
}

// Failure is a failed test and the cause that explains it, if any.
type Failure struct {
	Result
	// Cause is the first entry of the causes file that matches the name; meaningful only when Classified.
	Cause      Cause
	Classified bool
}

// NeedsLater reports whether the failure is explained by a feature a later issue brings.
func (f Failure) NeedsLater() bool { return f.Classified && f.Cause.Issue != ExistsIssue }

// IssueCount is how many failed tests wait for one issue's feature.
type IssueCount struct {
	Issue, Tests int
}

// Summary is everything the report says about a run.
type Summary struct {
	// Tests are all conformance tests, sorted by name: those of the run and those of the list it did not run.
	Tests []Result
	All   Counts
	// SIGs are the counts per SIG, sorted by SIG.
	SIGs []SIGCounts
	// Failures are the failed tests in the report's order: by group (in the order of Groups, unclassified
	// last), then cause (in file order), then name.
	Failures []Failure
	// FailingExisting is how many tests fail although their features exist today: unclassified, or explained by
	// a cause with ExistsIssue.
	FailingExisting int
	// NeedsLater is how many tests fail for a feature a later issue brings; ByIssue splits it per issue, sorted by
	// issue.
	NeedsLater int
	ByIssue    []IssueCount
	// SuiteFailures are the run's failed suite-level nodes (see Run).
	SuiteFailures []Result
	// TestTime is the sum of the tests' durations: with parallel processes, more than the run's wall-clock time.
	TestTime time.Duration
}

// ExistToday is how many tests have their features today: all but those failing for a later issue's feature.
// Passing, skipped and not run tests count as existing; nothing says otherwise.
func (s Summary) ExistToday() int { return s.All.Total - s.NeedsLater }

// Summarize counts a run's tests, adds the tests of list (which may be nil) that the run does not mention as not
// run, and classifies every failure with causes.
func Summarize(run Run, list []ListEntry, causes Causes) Summary {
	var s Summary
	s.Tests = withNotRun(run.Tests, list)
	s.SuiteFailures = slices.Clone(run.SuiteFailures)
	bySIG := map[string]*Counts{}
	byIssue := map[int]int{}
	for _, t := range s.Tests {
		s.All.add(t.Status)
		if bySIG[t.SIG] == nil {
			bySIG[t.SIG] = &Counts{}
		}
		bySIG[t.SIG].add(t.Status)
		s.TestTime += t.Duration
		if t.Status != StatusFailed {
			continue
		}
		f := Failure{Result: t}
		f.Cause, f.Classified = causes.Classify(t.Name)
		if f.NeedsLater() {
			s.NeedsLater++
			byIssue[f.Cause.Issue]++
		} else {
			s.FailingExisting++
		}
		s.Failures = append(s.Failures, f)
	}
	for sig, c := range bySIG {
		s.SIGs = append(s.SIGs, SIGCounts{SIG: sig, Counts: *c})
	}
	slices.SortFunc(s.SIGs, func(a, b SIGCounts) int { return strings.Compare(a.SIG, b.SIG) })
	for issue, n := range byIssue {
		s.ByIssue = append(s.ByIssue, IssueCount{Issue: issue, Tests: n})
	}
	slices.SortFunc(s.ByIssue, func(a, b IssueCount) int { return cmp.Compare(a.Issue, b.Issue) })
	slices.SortStableFunc(s.Failures, compareFailures)
	return s
}

// withNotRun returns tests plus a not run result for every list entry without one, sorted by name.
func withNotRun(tests []Result, list []ListEntry) []Result {
	out := slices.Clone(tests)
	have := make(map[string]bool, len(tests))
	for _, t := range tests {
		have[t.Name] = true
	}
	for _, e := range list {
		if have[e.Codename] {
			continue
		}
		have[e.Codename] = true
		out = append(out, Result{
			Name: e.Codename, SIG: sigOf(e.Codename), Status: StatusNotRun,
			Serial: strings.Contains(e.Codename, "[Serial]"),
		})
	}
	slices.SortFunc(out, func(a, b Result) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// compareFailures orders failures by group, cause and name, unclassified ones last.
func compareFailures(a, b Failure) int {
	return cmp.Or(
		cmp.Compare(groupRank(a), groupRank(b)),
		cmp.Compare(causeRank(a), causeRank(b)),
		strings.Compare(a.Name, b.Name),
	)
}

func groupRank(f Failure) int {
	if !f.Classified {
		return len(Groups)
	}
	return slices.Index(Groups, f.Cause.Group)
}

func causeRank(f Failure) int {
	if !f.Classified {
		return -1
	}
	return f.Cause.pos
}
