package report

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The JUnit files under testdata were written by ginkgo v2.32.0's reporter with the configuration e2e.test v1.37.2
// uses (k8s.io/kubernetes/test/e2e/framework/internal/junit): a parallel part focused on [Conformance] and skipping
// [Serial], a serial part, and a rerun of one test. Only source paths and durations were edited afterwards.
const (
	parallelXML = "testdata/parallel/junit_01.xml"
	serialXML   = "testdata/serial/junit_01.xml"
	rerunXML    = "testdata/rerun/junit_01.xml"
)

const (
	nameAdmission = "[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should mutate custom resource [Conformance]"
	nameCRD       = "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] Simple CustomResourceDefinition creating/deleting custom resource definition objects works [Conformance]"
	nameGC        = "[sig-api-machinery] Garbage collector should keep the rc around until all its pods are deleted if the deleteOptions says so [Conformance] [Serial]"
	nameRestart   = "[sig-api-machinery] Watchers should be able to restart watching from the last resource version observed by the previous watch [Conformance]"
	nameObserve   = "[sig-api-machinery] Watchers should observe add, update, and delete watch notifications on configmaps [Conformance]"
	nameOrder     = "[sig-api-machinery] Watchers should receive events on concurrent watches in same order [Conformance]"
	nameDaemon    = "[sig-apps] Daemon set should rollback without unnecessary restarts [Conformance] [Serial]"
	nameJob       = "[sig-apps] Job should manage the lifecycle of a job [Conformance]"
	nameRS        = "[sig-apps] ReplicaSet should serve a basic image on each replica with a public image [Conformance]"
	nameKubectl   = "[sig-cli] Kubectl client Kubectl version should check is all data is printed [Conformance]"
	nameDNS       = "[sig-network] DNS should provide DNS for services [Conformance]"
	nameServices  = "[sig-network] Services should serve endpoints on same port and different protocols [Conformance]"
	nameKubelet   = "[sig-node] Kubelet when scheduling a busybox command in a pod should print the output to logs [Conformance] [NodeConformance]"
	nameExec      = "[sig-node] Pods should support remote command execution over websockets [Conformance] [NodeConformance]"
	nameProbe     = `[sig-node] Probing container should *not* be restarted with a exec "cat /tmp/health" liveness probe [Conformance] [NodeConformance]`
	nameImmutable = "[sig-storage] ConfigMap should be immutable if `immutable` field is set [Conformance]"
	// In the list only: no file mentions them.
	nameSched = "[sig-scheduling] SchedulerPredicates validates resource limits of pods that are allowed to run [Conformance] [Serial]"
	nameSA    = "[sig-auth] ServiceAccounts should mount an API token into pods [Conformance]"
)

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// ignoreMessage leaves messages to the tests that check them one by one: some are long progress reports.
var ignoreMessage = cmpopts.IgnoreFields(Result{}, "Message")

func TestParseJUnit(t *testing.T) {
	tests := []struct {
		file          string
		want          []Result
		suiteFailures []string
	}{{
		file: parallelXML,
		want: []Result{
			{Name: nameAdmission, SIG: "sig-api-machinery", Status: StatusFailed, Duration: secs(12.483912047)},
			{Name: nameCRD, SIG: "sig-api-machinery", Status: StatusFailed, Duration: secs(1.204377915)},
			{Name: nameGC, SIG: "sig-api-machinery", Status: StatusSkipped, Serial: true},
			{Name: nameRestart, SIG: "sig-api-machinery", Status: StatusPassed, Duration: secs(0.231940112)},
			{Name: nameObserve, SIG: "sig-api-machinery", Status: StatusPassed, Duration: secs(1.318822404)},
			{Name: nameOrder, SIG: "sig-api-machinery", Status: StatusFailed, Duration: secs(4.882013397)},
			{Name: nameDaemon, SIG: "sig-apps", Status: StatusSkipped, Serial: true},
			{Name: nameJob, SIG: "sig-apps", Status: StatusFailed, Duration: secs(900.002318204)},
			{Name: nameRS, SIG: "sig-apps", Status: StatusPassed, Duration: secs(10.340552786)},
			{Name: nameKubectl, SIG: "sig-cli", Status: StatusFailed, Duration: secs(0.412770145)},
			{Name: nameDNS, SIG: "sig-network", Status: StatusPassed, Duration: secs(9.612083470)},
			{Name: nameServices, SIG: "sig-network", Status: StatusFailed, Duration: secs(121.874355012)},
			{Name: nameKubelet, SIG: "sig-node", Status: StatusSkipped, Duration: secs(0.004118336)},
			{Name: nameExec, SIG: "sig-node", Status: StatusFailed, Duration: secs(4.209341007)},
			{Name: nameProbe, SIG: "sig-node", Status: StatusPassed, Duration: secs(245.186402918)},
			{Name: nameImmutable, SIG: "sig-storage", Status: StatusPassed, Duration: secs(0.158390771)},
		},
	}, {
		file: serialXML,
		want: []Result{
			{Name: nameAdmission, SIG: "sig-api-machinery", Status: StatusSkipped},
			{Name: nameCRD, SIG: "sig-api-machinery", Status: StatusSkipped},
			{Name: nameGC, SIG: "sig-api-machinery", Status: StatusFailed, Duration: secs(36.117490532), Serial: true},
			{Name: nameRestart, SIG: "sig-api-machinery", Status: StatusSkipped},
			{Name: nameObserve, SIG: "sig-api-machinery", Status: StatusSkipped},
			{Name: nameOrder, SIG: "sig-api-machinery", Status: StatusSkipped},
			{Name: nameDaemon, SIG: "sig-apps", Status: StatusFailed, Duration: secs(300.418725316), Serial: true},
			{Name: nameJob, SIG: "sig-apps", Status: StatusSkipped},
			{Name: nameRS, SIG: "sig-apps", Status: StatusSkipped},
			{Name: nameKubectl, SIG: "sig-cli", Status: StatusSkipped},
			{Name: nameDNS, SIG: "sig-network", Status: StatusSkipped},
			{Name: nameServices, SIG: "sig-network", Status: StatusSkipped},
			{Name: nameKubelet, SIG: "sig-node", Status: StatusSkipped},
			{Name: nameExec, SIG: "sig-node", Status: StatusSkipped},
			{Name: nameProbe, SIG: "sig-node", Status: StatusSkipped},
			{Name: nameImmutable, SIG: "sig-storage", Status: StatusSkipped},
		},
		suiteFailures: []string{"[ReportAfterSuite] [sig-testing] Log Check"},
	}}
	for _, tt := range tests {
		t.Run(filepath.Base(filepath.Dir(tt.file)), func(t *testing.T) {
			run := parseFile(t, tt.file)
			if diff := cmp.Diff(tt.want, run.Tests, ignoreMessage); diff != "" {
				t.Errorf("tests (-want +got):\n%s", diff)
			}
			var got []string
			for _, r := range run.SuiteFailures {
				got = append(got, r.Name)
			}
			if diff := cmp.Diff(tt.suiteFailures, got); diff != "" {
				t.Errorf("suite failures (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseJUnitMessages checks the text of each kind of outcome: e2e.test leaves the message attribute empty, so
// the message is the element's text.
func TestParseJUnitMessages(t *testing.T) {
	run := parseFile(t, parallelXML)
	tests := []struct {
		name, wantPrefix, wantContains string
	}{
		// A failure whose message has several lines keeps all of them, then ginkgo's location line.
		{nameOrder, "[FAILED] watch 3 saw events out of order: got `ADDED cm-188` (rv 1042) | want `ADDED cm-187` (rv 1041)\n" +
			"events seen: 187 of 250\nlast resourceVersion: 1042\nIn [It] at: k8s.io/kubernetes/test/e2e/apimachinery/watch.go:", ""},
		{nameKubectl, "[FAILED] error running /usr/local/bin/kubectl", "error: the server doesn't have a resource type \"version\"\n"},
		// A panic is an <error> element.
		{nameExec, "[PANICKED] Test Panicked\nIn [It] at: ", "\n\nassignment to entry in nil map\n\nFull Stack Trace\n"},
		// A spec timeout is a <failure type="timedout">.
		{nameJob, "[TIMEDOUT] A node timeout occurred\nIn [It] at: k8s.io/kubernetes/test/e2e/apps/job.go:", "Progress Report"},
		// A test that called Skip keeps the reason; one skipped by the focus has the bare message.
		{nameKubelet, "skipped - Only supported for node OS distro [gci ubuntu] (not debian)", ""},
		{nameGC, "skipped", ""},
		{nameRestart, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := find(t, run.Tests, tt.name)
			if !strings.HasPrefix(r.Message, tt.wantPrefix) || !strings.Contains(r.Message, tt.wantContains) {
				t.Errorf("message = %q\nwant prefix %q and containing %q", r.Message, tt.wantPrefix, tt.wantContains)
			}
			if r.Message != strings.TrimSpace(r.Message) {
				t.Errorf("message %q is not trimmed", r.Message)
			}
		})
	}
	if tt := tests[len(tests)-1]; find(t, run.Tests, tt.name).Message != "" {
		t.Errorf("passed test has a message")
	}
}

// TestParseJUnitDropsOtherSpecs checks that only [Conformance] tests are kept: the unfocused specs a focused run
// lists as skipped (even one tagged [NodeConformance]) and the suite-level nodes are dropped.
func TestParseJUnitDropsOtherSpecs(t *testing.T) {
	data, err := os.ReadFile(parallelXML)
	if err != nil {
		t.Fatal(err)
	}
	dropped := []string{
		"[It] [sig-node] Pods should cap back-off at MaxContainerBackOff [Slow] [NodeConformance]",
		"[SynchronizedBeforeSuite]",
		"[ReportAfterSuite] [sig-testing] Log Check",
	}
	run := parseFile(t, parallelXML)
	for _, name := range dropped {
		if !strings.Contains(string(data), `testcase name="`+name+`"`) {
			t.Fatalf("%s no longer lists %q, which the test is about", parallelXML, name)
		}
		for _, r := range run.Tests {
			if strings.Contains(r.Name, strings.TrimPrefix(name, "[It] ")) {
				t.Errorf("kept %q", r.Name)
			}
		}
	}
}

// TestParseJUnitShapes covers what other writers produce and what is refused.
func TestParseJUnitShapes(t *testing.T) {
	tests := []struct {
		name    string
		xml     string
		want    []Result
		wantErr error
	}{{
		name: "single testsuite root, status attribute only",
		xml: `<testsuite name="e2e"><testcase name="[sig-apps] Job works [Conformance]" status="timedout" time="2"></testcase>` +
			`<testcase name="[It] no sig here [Conformance]" time="1.5"></testcase></testsuite>`,
		want: []Result{
			{Name: "[sig-apps] Job works [Conformance]", SIG: "sig-apps", Status: StatusFailed, Duration: 2 * time.Second},
			{Name: "no sig here [Conformance]", SIG: "unknown", Status: StatusPassed, Duration: 1500 * time.Millisecond},
		},
	}, {
		name: "message attribute wins over text",
		xml: `<testsuites><testsuite><testcase name="[It] [sig-node] [Feature:X] [sig-apps] a [Conformance]" status="failed">` +
			`<failure message="  short message  " type="failed">[FAILED] short message&#xA;In [It] at: x.go:1</failure></testcase></testsuite></testsuites>`,
		want: []Result{{Name: "[sig-node] [Feature:X] [sig-apps] a [Conformance]", SIG: "sig-node", Status: StatusFailed, Message: "short message"}},
	}, {
		name: "same name twice in one file: the run wins over the skip",
		xml: `<testsuites><testsuite>` +
			`<testcase name="[It] [sig-cli] b [Conformance]" status="passed" time="3"></testcase>` +
			`<testcase name="[It] [sig-cli] b [Conformance]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>` +
			`</testsuite></testsuites>`,
		want: []Result{{Name: "[sig-cli] b [Conformance]", SIG: "sig-cli", Status: StatusPassed, Duration: 3 * time.Second}},
	}, {
		name:    "not XML",
		xml:     `{"tests": []}`,
		wantErr: ErrJUnit,
	}, {
		name:    "another root",
		xml:     `<report><testcase name="[It] a [Conformance]"/></report>`,
		wantErr: ErrJUnit,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := ParseJUnit(strings.NewReader(tt.xml))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, run.Tests, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("tests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadJUnitMerge checks how results of several files combine: a run beats a skip whatever the order, and of
// two runs the later file wins.
func TestReadJUnitMerge(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  map[string]Status
	}{{
		name:  "parallel then serial",
		files: []string{parallelXML, serialXML},
		want: map[string]Status{
			nameGC: StatusFailed, nameDaemon: StatusFailed, // skipped, then run
			nameOrder: StatusFailed, nameRestart: StatusPassed, nameKubectl: StatusFailed, // run, then skipped
			nameKubelet: StatusSkipped, // skipped in both
		},
	}, {
		name:  "serial then parallel",
		files: []string{serialXML, parallelXML},
		want:  map[string]Status{nameGC: StatusFailed, nameDaemon: StatusFailed, nameOrder: StatusFailed, nameKubelet: StatusSkipped},
	}, {
		name:  "a rerun after the run replaces its result",
		files: []string{parallelXML, serialXML, rerunXML},
		want:  map[string]Status{nameKubectl: StatusPassed, nameGC: StatusFailed, nameOrder: StatusFailed},
	}, {
		name:  "the later file wins between two runs",
		files: []string{rerunXML, parallelXML},
		want:  map[string]Status{nameKubectl: StatusFailed},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := ReadJUnit(tt.files...)
			if err != nil {
				t.Fatal(err)
			}
			if len(run.Tests) != 16 {
				t.Errorf("got %d tests, want 16 (one per name)", len(run.Tests))
			}
			for name, want := range tt.want {
				if got := find(t, run.Tests, name).Status; got != want {
					t.Errorf("%s: status %q, want %q", name, got, want)
				}
			}
		})
	}
	run, err := ReadJUnit(parallelXML, serialXML, rerunXML)
	if err != nil {
		t.Fatal(err)
	}
	if r := find(t, run.Tests, nameKubectl); r.Message != "" || r.Duration != secs(0.387119520) {
		t.Errorf("the rerun's result should replace all of the first run's, got %+v", r)
	}
	if len(run.SuiteFailures) != 1 {
		t.Errorf("suite failures = %+v, want the serial part's Log Check", run.SuiteFailures)
	}
	if _, err := ReadJUnit(parallelXML, "testdata/missing.xml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error = %v, want ErrNotExist", err)
	}
}

func FuzzParseJUnit(f *testing.F) {
	for _, p := range []string{parallelXML, serialXML} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		run, err := ParseJUnit(strings.NewReader(string(data)))
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, r := range run.Tests {
			if !strings.Contains(r.Name, ConformanceTag) || seen[r.Name] || r.Duration < 0 {
				t.Fatalf("bad result %+v", r)
			}
			seen[r.Name] = true
		}
	})
}

func parseFile(t *testing.T, path string) Run {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := ParseJUnit(f)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func find(t *testing.T, tests []Result, name string) Result {
	t.Helper()
	for _, r := range tests {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for %q", name)
	return Result{}
}
