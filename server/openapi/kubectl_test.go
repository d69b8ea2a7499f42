package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wheelhouse-dev/wheelhouse/server/kubectltest"
	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// newKubectlServer serves the OpenAPI documents with just enough discovery for kubectl to resolve resource names.
func newKubectlServer(t *testing.T, s *Spec, reg *resources.Registry) *httptest.Server {
	t.Helper()
	srv := newTestServer(t, s)
	mux := srv.Config.Handler.(*http.ServeMux)
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc(testPrefix+"/api", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	})
	groups := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, gv := range reg.GroupVersions() {
		mux.HandleFunc(testPrefix+"/"+gvPath(gv), func(w http.ResponseWriter, r *http.Request) {
			list := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: gv.String()}
			for _, res := range reg.InGroupVersion(gv) {
				list.APIResources = append(list.APIResources, metav1.APIResource{Name: res.Plural,
					SingularName: res.Singular, Kind: res.GVK.Kind, Namespaced: res.Namespaced, Verbs: res.ServedVerbs()})
			}
			writeJSON(w, list)
		})
		if gv.Group != "" {
			v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			groups.Groups = append(groups.Groups, metav1.APIGroup{Name: gv.Group,
				Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
		}
	}
	mux.HandleFunc(testPrefix+"/apis", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, groups) })
	return srv
}

// TestKubectlExplain runs a real kubectl explain against the documents: the OpenAPI v3 path (the default) and the
// v2 protobuf path (--output=plaintext-openapiv2).
func TestKubectlExplain(t *testing.T) {
	bin := kubectltest.Binary(t)
	reg := testRegistry(t)
	srv := newKubectlServer(t, testSpec(t), reg)
	home := t.TempDir()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"deployments.spec.replicas"},
			[]string{"GROUP:      apps", "KIND:       Deployment", "FIELD: replicas <integer>", "Number of desired pods."}},
		{[]string{"pods.spec.containers.ports"},
			[]string{"FIELD: ports <[]ContainerPort>", "containerPort\t<integer> -required-", "enum: SCTP, TCP, UDP"}},
		{[]string{"deployment.spec.strategy.rollingUpdate"},
			[]string{"maxSurge\t<IntOrString>", "maxUnavailable\t<IntOrString>"}},
		{[]string{"namespaces.status"}, []string{"FIELD: status <NamespaceStatus>", "phase\t<string>"}},
		{[]string{"pods", "--output=plaintext-openapiv2"},
			[]string{"KIND:     Pod", "VERSION:  v1", "spec\t<Object>", "Pod is a collection of containers"}},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := append([]string{"explain", "--server", srv.URL + testPrefix, "--cache-dir", t.TempDir()}, tt.args...)
			cmd := exec.CommandContext(t.Context(), bin, args...)
			cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+filepath.Join(home, "none"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %v: %v\n%s", args, err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestKubectlUsesServerFieldValidation checks that kubectl's QueryParamVerifierV3 finds fieldValidation on the
// PATCH operations and so leaves validation to the server (fieldValidation=Strict). Were it not found, kubectl
// would validate against the v2 schema itself and refuse the manifest's unknown field before sending anything.
func TestKubectlUsesServerFieldValidation(t *testing.T) {
	bin := kubectltest.Binary(t)
	reg := testRegistry(t)
	srv := newKubectlServer(t, testSpec(t), reg)
	queries := make(chan string, 1)
	srv.Config.Handler.(*http.ServeMux).HandleFunc("POST "+testPrefix+"/api/v1/namespaces/default/configmaps",
		func(w http.ResponseWriter, r *http.Request) {
			queries <- r.URL.RawQuery
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.Copy(w, r.Body)
		})
	home := t.TempDir()
	manifest := filepath.Join(home, "cm.yaml")
	if err := os.WriteFile(manifest, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"+
		"  namespace: default\ndata:\n  a: b\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, "create", "--server", srv.URL+testPrefix, "--cache-dir", t.TempDir(),
		"--validate=strict", "-o", "name", "-f", manifest)
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG="+filepath.Join(home, "none"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl create: %v\n%s", err, out)
	}
	select {
	case q := <-queries:
		if !strings.Contains(q, "fieldValidation=Strict") {
			t.Errorf("create query %q lacks fieldValidation=Strict", q)
		}
	default:
		t.Fatalf("kubectl sent no create request:\n%s", out)
	}
}
