package report

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// testSummary summarizes the three testdata files with the testdata list and causes.
func testSummary(t *testing.T) Summary {
	t.Helper()
	run, err := ReadJUnit(parallelXML, serialXML, rerunXML)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ReadList("testdata/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	causes, err := LoadCauses("testdata/causes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return Summarize(run, list, causes)
}

// failureView is what the report shows of a failure.
type failureView struct {
	Name       string
	Classified bool
	Issue      int
}

func TestSummarize(t *testing.T) {
	type want struct {
		all             Counts
		sigs            []SIGCounts
		failures        []failureView
		failingExisting int
		needsLater      int
		existToday      int
		byIssue         []IssueCount
	}
	run, err := ReadJUnit(parallelXML, serialXML, rerunXML)
	if err != nil {
		t.Fatal(err)
	}
	list, err := ReadList("testdata/conformance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	causes, err := LoadCauses("testdata/causes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The failures and their order are the same in every case below: by group (missing kind or controller,
	// then network), by cause in file order, then the unclassified ones by name.
	failures := []failureView{
		{nameAdmission, true, 28}, {nameCRD, true, 27}, {nameJob, true, 24}, {nameDaemon, true, 25},
		{nameServices, true, 23},
		{nameGC, false, 0}, {nameOrder, false, 0}, {nameExec, false, 0},
	}
	byIssue := []IssueCount{{24, 1}, {25, 1}, {27, 1}, {28, 1}}
	tests := []struct {
		name string
		list []ListEntry
		want want
	}{{
		name: "with the list: its tests no file mentions are not run",
		list: list,
		want: want{
			all: Counts{Total: 18, Passed: 7, Failed: 8, Skipped: 1, NotRun: 2},
			sigs: []SIGCounts{
				{"sig-api-machinery", Counts{Total: 6, Passed: 2, Failed: 4}},
				{"sig-apps", Counts{Total: 3, Passed: 1, Failed: 2}},
				{"sig-auth", Counts{Total: 1, NotRun: 1}},
				{"sig-cli", Counts{Total: 1, Passed: 1}},
				{"sig-network", Counts{Total: 2, Passed: 1, Failed: 1}},
				{"sig-node", Counts{Total: 3, Passed: 1, Failed: 1, Skipped: 1}},
				{"sig-scheduling", Counts{Total: 1, NotRun: 1}},
				{"sig-storage", Counts{Total: 1, Passed: 1}},
			},
			failures:        failures,
			failingExisting: 4, // three unclassified and the one with issue 23
			needsLater:      4,
			existToday:      14,
			byIssue:         byIssue,
		},
	}, {
		name: "without the list: the files' tests only",
		want: want{
			all: Counts{Total: 16, Passed: 7, Failed: 8, Skipped: 1},
			sigs: []SIGCounts{
				{"sig-api-machinery", Counts{Total: 6, Passed: 2, Failed: 4}},
				{"sig-apps", Counts{Total: 3, Passed: 1, Failed: 2}},
				{"sig-cli", Counts{Total: 1, Passed: 1}},
				{"sig-network", Counts{Total: 2, Passed: 1, Failed: 1}},
				{"sig-node", Counts{Total: 3, Passed: 1, Failed: 1, Skipped: 1}},
				{"sig-storage", Counts{Total: 1, Passed: 1}},
			},
			failures:        failures,
			failingExisting: 4,
			needsLater:      4,
			existToday:      12,
			byIssue:         byIssue,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Summarize(run, tt.list, causes)
			var fs []failureView
			for _, f := range s.Failures {
				fs = append(fs, failureView{f.Name, f.Classified, f.Cause.Issue})
			}
			got := want{s.All, s.SIGs, fs, s.FailingExisting, s.NeedsLater, s.ExistToday(), s.ByIssue}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummarizeNotRun(t *testing.T) {
	s := testSummary(t)
	want := []Result{
		{Name: nameSched, SIG: "sig-scheduling", Status: StatusNotRun, Serial: true},
		{Name: nameSA, SIG: "sig-auth", Status: StatusNotRun},
	}
	for _, w := range want {
		if diff := cmp.Diff(w, find(t, s.Tests, w.Name)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
	for i := 1; i < len(s.Tests); i++ {
		if s.Tests[i-1].Name >= s.Tests[i].Name {
			t.Errorf("tests not sorted by name at %d: %q, %q", i, s.Tests[i-1].Name, s.Tests[i].Name)
		}
	}
}

func TestSummarizeEmpty(t *testing.T) {
	s := Summarize(Run{}, nil, Causes{})
	want := Summary{}
	if diff := cmp.Diff(want, s, cmpopts.EquateEmpty(), cmp.AllowUnexported(Cause{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if s.ExistToday() != 0 {
		t.Errorf("ExistToday = %d", s.ExistToday())
	}
}
