package report

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCausesErrors(t *testing.T) {
	const good = "- match: 'Job'\n  group: missing kind or controller\n  cause: no Job controller\n  issue: 24\n"
	tests := []struct {
		name string
		yaml string
		// want are substrings of the error: where the entry is and what is wrong.
		want []string
	}{
		{"unknown field", good + "- match: 'Daemon'\n  group: network\n  cause: c\n  issue: 25\n  isue: 25\n",
			[]string{`entry 2 (line 5, match "Daemon")`, `unknown field "isue"`}},
		{"missing field", good + "- match: 'Daemon'\n  group: network\n  cause: c\n",
			[]string{`entry 2 (line 5, match "Daemon")`, `missing field "issue"`}},
		{"unknown group", "- match: 'x'\n  group: networking\n  cause: c\n  issue: 23\n",
			[]string{`entry 1 (line 1, match "x")`, `unknown group "networking"`, `"node/runtime"`}},
		{"regexp that does not compile", good + "- match: '[sig-apps'\n  group: image\n  cause: c\n  issue: 23\n",
			[]string{`entry 2 (line 5, match "[sig-apps")`, "match: error parsing regexp"}},
		{"empty match", "- match: ''\n  group: image\n  cause: c\n  issue: 23\n",
			[]string{`entry 1 (line 1, match "")`, "empty match"}},
		{"cause of two lines", "- match: x\n  group: image\n  cause: |\n    one\n    two\n  issue: 23\n",
			[]string{"entry 1 (line 1", "cause must be one non-empty line"}},
		{"blank cause", "- match: x\n  group: image\n  cause: ' '\n  issue: 23\n",
			[]string{"entry 1 (line 1", "cause must be one non-empty line"}},
		{"issue zero", "- match: x\n  group: image\n  cause: c\n  issue: 0\n",
			[]string{"entry 1 (line 1", "issue must be a positive number"}},
		{"issue not a number", "- match: x\n  group: image\n  cause: c\n  issue: twenty\n",
			[]string{"entry 1 (line 1", "cannot unmarshal"}},
		{"field twice", "- match: x\n  match: y\n  group: image\n  cause: c\n  issue: 23\n",
			[]string{"entry 1 (line 1", `field "match" given twice`}},
		{"entry not a mapping", good + "- just a string\n",
			[]string{"entry 2 (line 5)", "want a mapping"}},
		{"not a list", "match: x\ngroup: image\n", []string{"line 1: want a list of entries"}},
		{"not YAML", "- match: [\n", []string{"yaml:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCauses([]byte(tt.yaml))
			if !errors.Is(err, ErrCauses) {
				t.Fatalf("error = %v, want ErrCauses", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseCausesEmpty(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n", "[]\n"} {
		cs, err := ParseCauses([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if _, ok := cs.Classify(nameJob); ok || len(cs.Entries()) != 0 {
			t.Errorf("%q: want no entries, got %+v", doc, cs.Entries())
		}
	}
}

func TestClassify(t *testing.T) {
	cs, err := LoadCauses("testdata/causes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		wantIssue int // 0: unclassified
	}{
		// Matches the AdmissionWebhook entry and the custom resource one after it: the first wins.
		{nameAdmission, 28},
		{nameCRD, 27},
		{nameJob, 24},
		{nameDaemon, 25},
		{nameServices, 23},
		{nameOrder, 0},
		{nameExec, 0},
		// The expressions are not anchored unless they say so: "Job " must start the name after "[sig-apps] ".
		{"[sig-apps] CronJob should schedule multiple jobs concurrently [Conformance]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := cs.Classify(tt.name)
			if got := map[bool]int{true: c.Issue}[ok]; got != tt.wantIssue {
				t.Errorf("issue = %d (classified %v, cause %q), want %d", got, ok, c.Cause, tt.wantIssue)
			}
		})
	}
}

// TestCausesFile checks the hand-kept conformance/causes.yaml: it parses, and each entry explains the real test
// names it is meant for, and no others of those below.
func TestCausesFile(t *testing.T) {
	cs, err := LoadCauses("../causes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		wantIssue int // 0: unclassified
	}{
		{"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] should mutate custom resource with pruning [Conformance]", 25},
		{"[sig-api-machinery] AdmissionWebhook [Privileged:ClusterAdmin] listing validating webhooks should work [Conformance]", 25},
		{"[sig-api-machinery] CustomResourceConversionWebhook [Privileged:ClusterAdmin] should be able to convert from CR v1 to CR v2 [Conformance]", 25},
		{"[sig-api-machinery] CustomResourcePublishOpenAPI [Privileged:ClusterAdmin] works for multiple CRDs of different groups [Conformance]", 25},
		{"[sig-api-machinery] FieldValidation should create/apply a CR with unknown fields for CRD with no validation schema [Conformance]", 25},
		{"[sig-api-machinery] AggregatedDiscovery should support aggregated discovery interface for CRDs [Conformance]", 25},
		{"[sig-api-machinery] AggregatedDiscovery should support aggregated discovery interface [Conformance]", 25},
		{"[sig-api-machinery] Aggregator Should be able to support the 1.17 Sample API Server using the current Aggregator [LinuxOnly] [Conformance]", 31},
		{"[sig-apps] Job with successPolicy succeededCount rule should succeeded even when some indexes remain pending [Conformance]", 24},
		{"[sig-apps] CronJob should support CronJob API operations [Conformance]", 24},
		{"[sig-apps] Daemon set should run and stop simple daemon [Conformance] [Serial]", 24},
		{"[sig-apps] ControllerRevision should manage the lifecycle of a ControllerRevision [Conformance] [Serial]", 24},
		{"[sig-apps] StatefulSet Basic StatefulSet functionality [StatefulSetBasic] should have a working scale subresource [Conformance]", 24},
		{"[sig-apps] Deployment deployment should support rollover [Conformance]", 0},
		{"[sig-node] RuntimeClass should reject a Pod requesting a deleted RuntimeClass [Conformance] [NodeConformance]", 31},
		{"[sig-node] [DRA] CRUD Tests resource.k8s.io/v1 ResourceClaim [Conformance]", 31},
		{"[sig-node] PodTemplates should delete a collection of pod templates [Conformance]", 31},
		{"[sig-network] ServiceCIDR and IPAddress API should support IPAddress API operations [Conformance]", 31},
		{"[sig-network] IngressClass API should support creating IngressClass API operations [Conformance]", 31},
		{"[sig-apps] DisruptionController should create a PodDisruptionBudget [Conformance]", 26},
		{"[sig-cli] Kubectl client Kubectl expose should create services for rc  [Conformance]", 31},
		{"[sig-cli] Kubectl client Proxy server should support proxy with --port 0  [Conformance]", 23},
		{"[sig-cli] Kubectl client Kubectl run pod should create a pod from an image when restart is Never  [Conformance]", 0},
		{"[sig-network] EndpointSliceMirroring should mirror a custom Endpoints resource through create update and delete [Conformance]", 31},
		{"[sig-api-machinery] Garbage collector should keep the rc around until all its pods are deleted if the deleteOptions says so [Conformance] [Serial]", 31},
		{"[sig-api-machinery] Garbage collector should not delete dependents that have both valid owner and owner that's waiting for dependents to be deleted [Conformance] [Serial]", 31},
		{"[sig-api-machinery] Garbage collector should orphan RS created by deployment when deleteOptions.PropagationPolicy is Orphan [Conformance]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := cs.Classify(tt.name)
			if got := map[bool]int{true: c.Issue}[ok]; got != tt.wantIssue {
				t.Errorf("issue = %d (cause %q), want %d", got, c.Cause, tt.wantIssue)
			}
		})
	}
}
