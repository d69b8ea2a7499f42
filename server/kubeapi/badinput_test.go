package kubeapi

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	rawCMs  = "/api/v1/namespaces/default/configmaps"
	rawPods = "/api/v1/namespaces/default/pods"
)

// rawResponse is an API response read whole.
type rawResponse struct {
	code   int
	header http.Header
	body   []byte
}

// call sends one raw request as the admin to cluster c1.
func (env *testEnv) rawDo(t *testing.T, method, path, contentType string, body io.Reader) rawResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, env.url+Prefix("c1")+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResponse{code: resp.StatusCode, header: resp.Header, body: b}
}

// status decodes the response as a metav1.Status and checks that it agrees with the HTTP code.
func (r rawResponse) status(t *testing.T) metav1.Status {
	t.Helper()
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil || st.Kind != "Status" {
		t.Fatalf("response %d is not a Status (%v): %s", r.code, err, r.body)
	}
	if int(st.Code) != r.code {
		t.Errorf("Status code %d, HTTP code %d", st.Code, r.code)
	}
	return st
}

// wantStatus checks code and reason of a Status response.
func (r rawResponse) wantStatus(t *testing.T, code int, reason metav1.StatusReason) metav1.Status {
	t.Helper()
	st := r.status(t)
	if r.code != code || st.Reason != reason {
		t.Errorf("got %d %s (%q), want %d %s", r.code, st.Reason, st.Message, code, reason)
	}
	return st
}

func (env *testEnv) storeRev(t *testing.T) int64 {
	t.Helper()
	rev, err := env.store.CurrentRevision(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// create posts a JSON object and requires 201.
func (env *testEnv) rawCreate(t *testing.T, path, body string) map[string]any {
	t.Helper()
	return env.rawObject(t, http.MethodPost, path, "application/json", body, http.StatusCreated)
}

// rawObject sends one raw request, requires the code want and decodes the object answered.
func (env *testEnv) rawObject(t *testing.T, method, path, contentType, body string, want int) map[string]any {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	resp := env.rawDo(t, method, path, contentType, r)
	if resp.code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.code, resp.body, want)
	}
	var obj map[string]any
	if err := json.Unmarshal(resp.body, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// names lists the names of the objects at path.
func (env *testEnv) rawNames(t *testing.T, path string) []string {
	t.Helper()
	resp := env.rawDo(t, http.MethodGet, path, "", nil)
	if resp.code != http.StatusOK {
		t.Fatalf("list %s: %d %s", path, resp.code, resp.body)
	}
	var list struct {
		Items []metav1.PartialObjectMetadata `json:"items"`
	}
	if err := json.Unmarshal(resp.body, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, it.Name)
	}
	slices.Sort(out)
	return out
}

func TestBadInputIsRefusedWithoutWriting(t *testing.T) {
	env := newTestEnv(t)
	existing := env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing","labels":{"app":"x"}}}`)
	uid := existing["metadata"].(map[string]any)["uid"].(string)
	cm := func(meta string) string { return `{"apiVersion":"v1","kind":"ConfigMap","metadata":` + meta + `}` }
	for _, tc := range []struct {
		name, method, path, contentType, body string
		code                                  int
		reason                                metav1.StatusReason
		causes                                []string // details.causes[].field
		inMessage                             string
	}{
		{name: "malformed JSON", method: "POST", path: rawCMs, contentType: "application/json",
			body: `{"metadata":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed YAML", method: "POST", path: rawCMs, contentType: "application/yaml",
			body: "metadata: [\n  name: x\n", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "unsupported content type", method: "POST", path: rawCMs, contentType: "text/plain",
			body: cm(`{"name":"a"}`), code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "unparsable content type", method: "POST", path: rawCMs, contentType: "application/json; ===",
			body: cm(`{"name":"a"}`), code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "empty body", method: "POST", path: rawCMs, contentType: "application/json",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "wrong kind", method: "POST", path: rawCMs, contentType: "application/json",
			body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "bad name", method: "POST", path: rawCMs, contentType: "application/json",
			body: cm(`{"name":"Bad_Name"}`), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}},
		{name: "no name", method: "POST", path: rawCMs, contentType: "application/json",
			body: cm(`{}`), code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"metadata.name"}},
		{name: "pod without image", method: "POST", path: rawPods, contentType: "application/json",
			body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}]}}`,
			code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"spec.containers[0].image"}},
		{name: "unknown field, Strict", method: "POST", path: rawCMs + "?fieldValidation=Strict", contentType: "application/json",
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"bogusField":1}`,
			code: 400, reason: metav1.StatusReasonBadRequest, inMessage: "bogusField"},
		{name: "duplicate field, Strict", method: "POST", path: rawCMs + "?fieldValidation=Strict", contentType: "application/json",
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{},"data":{}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, inMessage: "data"},
		{name: "bad fieldValidation", method: "POST", path: rawCMs + "?fieldValidation=Loose", contentType: "application/json",
			body: cm(`{"name":"a"}`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "bad dryRun", method: "POST", path: rawCMs + "?dryRun=Some", contentType: "application/json",
			body: cm(`{"name":"a"}`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "stale resourceVersion", method: "PUT", path: rawCMs + "/existing", contentType: "application/json",
			body: cm(`{"name":"existing","resourceVersion":"1"}`), code: 409, reason: metav1.StatusReasonConflict},
		{name: "unparsable resourceVersion", method: "PUT", path: rawCMs + "/existing", contentType: "application/json",
			body: cm(`{"name":"existing","resourceVersion":"abc"}`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "PUT name mismatch", method: "PUT", path: rawCMs + "/existing", contentType: "application/json",
			body: cm(`{"name":"other"}`), code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "PUT missing object", method: "PUT", path: rawCMs + "/missing", contentType: "application/json",
			body: cm(`{"name":"missing"}`), code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown resource", method: "GET", path: "/api/v1/namespaces/default/widgets",
			code: 404, reason: metav1.StatusReasonNotFound},
		{name: "unknown group", method: "POST", path: "/apis/example.com/v1/namespaces/default/widgets", contentType: "application/json",
			body: `{}`, code: 404, reason: metav1.StatusReasonNotFound},
		{name: "empty plural", method: "GET", path: "/api/v1//x", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "empty name before a subresource", method: "GET", path: rawCMs + "//status", code: 404, reason: metav1.StatusReasonNotFound},
		{name: "write to a path with an empty segment", method: "PUT", path: rawCMs + "//status", contentType: "application/json",
			body: cm(`{"name":"existing"}`), code: 405, reason: metav1.StatusReasonMethodNotAllowed},
		{name: "namespace-less POST to a namespaced resource", method: "POST", path: "/api/v1/configmaps",
			contentType: "application/json", body: cm(`{"name":"a","namespace":"default"}`), code: 404, reason: metav1.StatusReasonNotFound},
		{name: "namespaced path to a cluster resource", method: "GET", path: "/api/v1/namespaces/default/nodes",
			code: 404, reason: metav1.StatusReasonNotFound},
		{name: "bad labelSelector", method: "GET", path: rawCMs + "?labelSelector=a+in+(", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "bad fieldSelector", method: "GET", path: rawCMs + "?fieldSelector=%3D%3D%3D", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "unsupported fieldSelector field", method: "GET", path: rawCMs + "?fieldSelector=spec.nodeName%3Dn1",
			code: 400, reason: metav1.StatusReasonBadRequest, inMessage: "spec.nodeName"},
		{name: "bad continue token", method: "GET", path: rawCMs + "?limit=1&continue=not-a-token!", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "continue token of valid base64 but no JSON", method: "GET", path: rawCMs + "?limit=1&continue=YWJj",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "continue with resourceVersion", method: "GET", path: rawCMs + "?continue=YWJj&resourceVersion=5",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "bad limit", method: "GET", path: rawCMs + "?limit=-1", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "bad resourceVersionMatch", method: "GET", path: rawCMs + "?resourceVersion=1&resourceVersionMatch=Newest",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "Exact without resourceVersion", method: "GET", path: rawCMs + "?resourceVersionMatch=Exact",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed JSON patch", method: "PATCH", path: rawCMs + "/existing", contentType: "application/json-patch+json",
			body: `[{"op":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "JSON patch that is not a list", method: "PATCH", path: rawCMs + "/existing", contentType: "application/json-patch+json",
			body: `{"op":"add"}`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "JSON patch with a bad path", method: "PATCH", path: rawCMs + "/existing", contentType: "application/json-patch+json",
			body: `[{"op":"remove","path":"/no/such"}]`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed merge patch", method: "PATCH", path: rawCMs + "/existing", contentType: "application/merge-patch+json",
			body: `{"data":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "malformed strategic patch", method: "PATCH", path: rawCMs + "/existing", contentType: "application/strategic-merge-patch+json",
			body: `{"data":`, code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "patch making the object invalid", method: "PATCH", path: rawCMs + "/existing", contentType: "application/merge-patch+json",
			body: `{"data":{"bad key!":"v"}}`, code: 422, reason: metav1.StatusReasonInvalid, causes: []string{"data[bad key!]"}},
		{name: "patch with an unsupported content type", method: "PATCH", path: rawCMs + "/existing", contentType: "application/json",
			body: `{}`, code: 415, reason: metav1.StatusReasonUnsupportedMediaType},
		{name: "apply without fieldManager", method: "PATCH", path: rawCMs + "/existing", contentType: "application/apply-patch+yaml",
			body: "data: {a: b}\n", code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "DELETE with uid precondition mismatch", method: "DELETE", path: rawCMs + "/existing", contentType: "application/json",
			body: `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"not-` + uid + `"}}`,
			code: 409, reason: metav1.StatusReasonConflict},
		{name: "DELETE with resourceVersion precondition mismatch", method: "DELETE", path: rawCMs + "/existing", contentType: "application/json",
			body: `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"resourceVersion":"1"}}`,
			code: 409, reason: metav1.StatusReasonConflict},
		{name: "DELETE with a bad propagationPolicy", method: "DELETE", path: rawCMs + "/existing?propagationPolicy=Sideways",
			code: 400, reason: metav1.StatusReasonBadRequest},
		{name: "DELETE with malformed options", method: "DELETE", path: rawCMs + "/existing", contentType: "application/json",
			body: `{"kind":`, code: 400, reason: metav1.StatusReasonBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := env.storeRev(t)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			st := env.rawDo(t, tc.method, tc.path, tc.contentType, body).wantStatus(t, tc.code, tc.reason)
			if tc.inMessage != "" && !strings.Contains(st.Message, tc.inMessage) {
				t.Errorf("message %q does not name %q", st.Message, tc.inMessage)
			}
			if tc.causes != nil {
				var got []string
				if st.Details != nil {
					for _, c := range st.Details.Causes {
						got = append(got, c.Field)
					}
				}
				if diff := cmp.Diff(tc.causes, got); diff != "" {
					t.Errorf("causes[].field (-want +got):\n%s", diff)
				}
			}
			if after := env.storeRev(t); after != before {
				t.Errorf("revision moved from %d to %d: a refused request wrote", before, after)
			}
		})
	}
	if got := env.rawNames(t, rawCMs); !slices.Contains(got, "existing") || slices.Contains(got, "a") {
		t.Errorf("configmaps after refused requests = %v, want existing kept and a never created", got)
	}
	if got := env.rawNames(t, rawPods); len(got) != 0 {
		t.Errorf("pods after refused requests = %v, want none", got)
	}
}

func TestUnknownFieldWarns(t *testing.T) {
	env := newTestEnv(t)
	for _, q := range []string{"", "?fieldValidation=Warn"} {
		name := "warn" + strings.TrimPrefix(q, "?fieldValidation=")
		resp := env.rawDo(t, http.MethodPost, rawCMs+q, "application/json",
			strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+strings.ToLower(name)+`"},"bogusField":1}`))
		if resp.code != http.StatusCreated {
			t.Fatalf("%q: %d %s, want 201", q, resp.code, resp.body)
		}
		if w := strings.Join(resp.header.Values("Warning"), "; "); !strings.Contains(w, "bogusField") {
			t.Errorf("%q: Warning header %q does not name bogusField", q, w)
		}
	}
	resp := env.rawDo(t, http.MethodPost, rawCMs+"?fieldValidation=Ignore", "application/json",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ignored"},"bogusField":1}`))
	if resp.code != http.StatusCreated || len(resp.header.Values("Warning")) != 0 {
		t.Errorf("Ignore: %d, warnings %q; want 201 without warnings", resp.code, resp.header.Values("Warning"))
	}
}

func TestListBelowCompactionIsExpired(t *testing.T) {
	env := newTestEnv(t)
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)
	old := env.storeRev(t)
	env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`)
	path := rawCMs + "?resourceVersionMatch=Exact&resourceVersion="
	if resp := env.rawDo(t, http.MethodGet, path+revString(old), "", nil); resp.code != http.StatusOK {
		t.Fatalf("list at %d before compaction: %d %s", old, resp.code, resp.body)
	}
	if err := env.store.Compact(t.Context(), env.storeRev(t)); err != nil {
		t.Fatal(err)
	}
	env.rawDo(t, http.MethodGet, path+revString(old), "", nil).wantStatus(t, http.StatusGone, metav1.StatusReasonExpired)
}

func TestBodyOverLimitIs413(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.MaxBodyBytes = 256 })
	before := env.storeRev(t)
	big := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"k":"` + strings.Repeat("x", 512) + `"}}`
	for _, tc := range []struct{ method, path, contentType string }{
		{http.MethodPost, rawCMs, "application/json"},
		{http.MethodPatch, rawCMs + "/kube-root-ca.crt", "application/merge-patch+json"},
	} {
		env.rawDo(t, tc.method, tc.path, tc.contentType, strings.NewReader(big)).
			wantStatus(t, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge)
	}
	if after := env.storeRev(t); after != before {
		t.Errorf("revision moved from %d to %d", before, after)
	}
	small := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"small"}}`
	if resp := env.rawDo(t, http.MethodPost, rawCMs, "application/json", strings.NewReader(small)); resp.code != http.StatusCreated {
		t.Errorf("small body: %d %s", resp.code, resp.body)
	}
}

// TestTooManyInFlightIs429: past the in-flight limit a request waits for a slot up to InFlightWait, then gets
// 429 with Retry-After and changes nothing; reads have slots of their own; in-process requests take none.
func TestTooManyInFlightIs429(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.MaxMutatingInFlight, c.InFlightWait = 1, 300*time.Millisecond })
	create := func(name string) rawResponse {
		return env.rawDo(t, http.MethodPost, rawCMs, "application/json",
			strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"}}`))
	}
	// Take the only mutating slot as a request in flight would (deterministic, unlike racing a slow body).
	env.api.mutating <- struct{}{}
	resp := create("refused")
	resp.wantStatus(t, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
	if resp.header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	if r := env.rawDo(t, http.MethodGet, rawCMs, "", nil); r.code != http.StatusOK {
		t.Errorf("read while the mutating slot is taken: %d, want 200", r.code)
	}
	// The controllers' and the scheduler's in-process requests are not held back.
	local, err := kubernetes.NewForConfig(env.api.LocalConfig("c1", User{Name: "system:kube-controller-manager", Groups: []string{"system:masters"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local"}},
		metav1.CreateOptions{}); err != nil {
		t.Errorf("in-process create while the slot is taken: %v", err)
	}
	// A request that finds the slot taken gets it when it frees within the wait: the slot is freed once the
	// request is seen waiting.
	env.api.cfg.InFlightWait = time.Minute
	go func() {
		for deadline := time.Now().Add(30 * time.Second); env.api.mutatingWaiting.Load() == 0 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
		<-env.api.mutating
	}()
	if r := create("waited"); r.code != http.StatusCreated {
		t.Errorf("a request whose slot freed while it waited: %d %s, want 201", r.code, r.body)
	}
	if r := env.rawDo(t, http.MethodGet, rawCMs+"/refused", "", nil); r.code != http.StatusNotFound {
		t.Errorf("the refused create was stored: %d", r.code)
	}
}

func TestDryRunCreateStoresNothing(t *testing.T) {
	env := newTestEnv(t)
	before := env.storeRev(t)
	resp := env.rawDo(t, http.MethodPost, rawCMs+"?dryRun=All", "application/json",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"},"data":{"k":"v"}}`))
	if resp.code != http.StatusCreated {
		t.Fatalf("dry run: %d %s", resp.code, resp.body)
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(resp.body, &cm); err != nil || cm.Name != "dry" || cm.Data["k"] != "v" || cm.UID == "" {
		t.Errorf("dry-run response = %+v, %v", cm, err)
	}
	if after := env.storeRev(t); after != before {
		t.Errorf("revision moved from %d to %d", before, after)
	}
	env.rawDo(t, http.MethodGet, rawCMs+"/dry", "", nil).wantStatus(t, http.StatusNotFound, metav1.StatusReasonNotFound)
}

func TestGenerateName(t *testing.T) {
	env := newTestEnv(t)
	obj := env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"gen-"}}`)
	name, _ := obj["metadata"].(map[string]any)["name"].(string)
	if !regexp.MustCompile(`^gen-[a-z0-9]{5}$`).MatchString(name) {
		t.Errorf("generated name %q, want gen- and 5 characters", name)
	}
	if got := env.rawNames(t, rawCMs); !slices.Contains(got, name) {
		t.Errorf("list = %v, want %s stored", got, name)
	}
}

func TestDeleteCollectionHonoursLabelSelector(t *testing.T) {
	env := newTestEnv(t)
	initial := env.rawNames(t, rawCMs)
	for _, o := range []struct{ name, app string }{{"x1", "x"}, {"x2", "x"}, {"y1", "y"}, {"z", ""}} {
		labels := ""
		if o.app != "" {
			labels = `,"labels":{"app":"` + o.app + `"}`
		}
		env.rawCreate(t, rawCMs, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+o.name+`"`+labels+`}}`)
	}
	env.rawCreate(t, "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}`)
	env.rawCreate(t, "/api/v1/namespaces/other/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x3","labels":{"app":"x"}}}`)

	resp := env.rawDo(t, http.MethodDelete, rawCMs+"?labelSelector=app%3Dx", "", nil)
	if resp.code != http.StatusOK {
		t.Fatalf("deletecollection: %d %s", resp.code, resp.body)
	}
	var deleted corev1.ConfigMapList
	if err := json.Unmarshal(resp.body, &deleted); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, it := range deleted.Items {
		gone = append(gone, it.Name)
	}
	slices.Sort(gone)
	if diff := cmp.Diff([]string{"x1", "x2"}, gone); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(initial), "y1", "z")))
	if diff := cmp.Diff(want, env.rawNames(t, rawCMs)); diff != "" {
		t.Errorf("left in default (-want +got):\n%s", diff)
	}
	if got := env.rawNames(t, "/api/v1/namespaces/other/configmaps"); !slices.Contains(got, "x3") {
		t.Errorf("other namespace = %v, want x3 kept", got)
	}
}

func revString(n int64) string { return strconv.FormatInt(n, 10) }

// TestUpdateWithAnotherUIDIsInvalid: as upstream, an update (PUT or PATCH, of the object or its status) that
// carries another UID is 422 on metadata.uid and changes nothing (kubelet's status patches rely on it as a
// precondition); one without a UID keeps the object's.
func TestUpdateWithAnotherUIDIsInvalid(t *testing.T) {
	env := newTestEnv(t)
	created := env.rawCreate(t, rawPods, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
	uid := created["metadata"].(map[string]any)["uid"].(string)
	rv := created["metadata"].(map[string]any)["resourceVersion"].(string)
	for _, tc := range []struct{ method, path, ct, body string }{
		{http.MethodPut, rawPods + "/p", "application/json", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","uid":"other","resourceVersion":"` + rv + `"},"spec":{"containers":[{"name":"c","image":"i"}]}}`},
		{http.MethodPatch, rawPods + "/p/status", "application/strategic-merge-patch+json", `{"metadata":{"uid":"other"},"status":{"phase":"Failed"}}`},
		{http.MethodPatch, rawPods + "/p", "application/merge-patch+json", `{"metadata":{"uid":"other","labels":{"a":"b"}}}`},
	} {
		st := env.rawDo(t, tc.method, tc.path, tc.ct, strings.NewReader(tc.body)).wantStatus(t, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid)
		if st.Details == nil || len(st.Details.Causes) != 1 || st.Details.Causes[0].Field != "metadata.uid" {
			t.Errorf("%s %s with another UID: %+v, want one cause on metadata.uid", tc.method, tc.path, st.Details)
		}
	}
	got := env.rawObject(t, http.MethodGet, rawPods+"/p", "", "", http.StatusOK)
	if got["metadata"].(map[string]any)["labels"] != nil || got["status"].(map[string]any)["phase"] == "Failed" {
		t.Fatalf("refused updates changed the pod: %v", got)
	}
	// The same UID, or none, is an update like any other.
	patched := env.rawObject(t, http.MethodPatch, rawPods+"/p/status", "application/strategic-merge-patch+json",
		`{"metadata":{"uid":"`+uid+`"},"status":{"message":"hi"}}`, http.StatusOK)
	if patched["status"].(map[string]any)["message"] != "hi" {
		t.Errorf("status patch with the pod's UID: %v", patched["status"])
	}
	if got := env.rawObject(t, http.MethodPatch, rawPods+"/p", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}}}`, http.StatusOK); got["metadata"].(map[string]any)["uid"] != uid {
		t.Errorf("patch without a UID: uid %v, want %s", got["metadata"].(map[string]any)["uid"], uid)
	}
}
