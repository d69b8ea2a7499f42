package web

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

type docSummary struct{ Kind, Name, FirstLine string }

func TestSplitYAML(t *testing.T) {
	tests := []struct {
		name, text string
		want       []docSummary
	}{
		{"documents, comments and empty documents", `# the app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
# nothing here
---

---
apiVersion: v1
kind: Secret
metadata:
  name: b
`, []docSummary{{"ConfigMap", "a", "apiVersion: v1"}, {"Secret", "b", "apiVersion: v1"}}},
		{"a JSON document", `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "j"}}`,
			[]docSummary{{"Namespace", "j", `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "j"}}`}}},
		{"YAML then JSON", "kind: Namespace\nmetadata: {name: yml}\n---\n{\"kind\": \"Namespace\", \"metadata\": {\"name\": \"j\"}}\n",
			[]docSummary{{"Namespace", "yml", "kind: Namespace"}, {"Namespace", "j", `{"kind": "Namespace", "metadata": {"name": "j"}}`}}},
		{"nothing but comments", "# one\n---\n# two\n", nil},
		{"empty", "", nil},
		// Browsers submit a textarea's lines with CRLF.
		{"CRLF line endings", "kind: Namespace\r\nmetadata:\r\n  name: a\r\n---\r\nkind: Namespace\r\nmetadata:\r\n  name: b\r\n",
			[]docSummary{{"Namespace", "a", "kind: Namespace"}, {"Namespace", "b", "kind: Namespace"}}},
		{"a separator with a comment", "kind: Namespace\nmetadata:\n  name: a\n--- # the second\nkind: Namespace\nmetadata:\n  name: b\n",
			[]docSummary{{"Namespace", "a", "kind: Namespace"}, {"Namespace", "b", "kind: Namespace"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := splitYAML(tt.text)
			if err != nil {
				t.Fatalf("splitYAML: %v", err)
			}
			var got []docSummary
			for _, d := range docs {
				first, _, _ := strings.Cut(d.text, "\n")
				got = append(got, docSummary{d.obj.GetKind(), d.obj.GetName(), strings.TrimRight(first, "\r")})
			}
			wantDiff(t, "documents", tt.want, got)
		})
	}
}

func TestSplitYAMLErrors(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"the second document", "kind: Namespace\nmetadata: {name: a}\n---\nkind: [unclosed\n", "document 2 is not valid YAML"},
		{"after an empty document", "kind: Namespace\n---\n---\nkind: [unclosed\n", "document 3 is not valid YAML"},
		{"a list, not an object", "- a\n- b\n", "document 1 is not valid YAML"},
		// A stream may open with "---" (helm template's output does): what follows is its first document.
		{"the first document after a leading separator", "---\nkind: [unclosed\n", "document 1 is not valid YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := splitYAML(tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("splitYAML error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

const deploymentYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1.27
        ports:
        - containerPort: 80
`

func TestAnnotate(t *testing.T) {
	flow := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: prod}\ndata:\n  a: b\n"
	tests := []struct {
		name, text, field string
		wantLine          int
	}{
		{"a scalar", deploymentYAML, "spec.replicas", 6},
		{"in a list item", deploymentYAML, "spec.template.spec.containers[0].image", 15},
		{"nested lists", deploymentYAML, "spec.template.spec.containers[0].ports[0].containerPort", 17},
		{"missing field: its list item", deploymentYAML, "spec.template.spec.containers[0].resources.limits", 14},
		{"missing list item: the list", deploymentYAML, "spec.template.spec.containers[2].image", 13},
		{"missing field: its parent", deploymentYAML, "spec.strategy.type", 5},
		{"a map key", deploymentYAML, "spec.selector.matchLabels[app]", 8},
		{"nothing in the document: the first line", deploymentYAML, "status.replicas", 1},
		{"in a flow map", flow, "metadata.name", 3},
		{"another key of a flow map", flow, "metadata.namespace", 3},
		{"a document that does not parse: the first line", "kind: [\nmetadata:\n  name: x\n", "metadata.name", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := annotate(tt.text, map[string][]string{tt.field: {"Invalid value"}})
			wantEqual(t, "lines", len(lines), strings.Count(strings.TrimRight(tt.text, "\n"), "\n")+1)
			var at []int
			for i, l := range lines {
				wantEqual(t, "line number", l.N, i+1)
				if len(l.Errors) > 0 {
					at = append(at, l.N)
					wantDiff(t, "errors", []string{tt.field + ": Invalid value"}, l.Errors)
				}
			}
			wantDiff(t, "lines with the error", []int{tt.wantLine}, at)
		})
	}
	t.Run("several causes", func(t *testing.T) {
		lines := annotate(deploymentYAML, map[string][]string{"spec.replicas": {"must be >= 0", "is odd"},
			"metadata.name": {"already taken"}})
		wantDiff(t, "line 4", []string{"metadata.name: already taken"}, lines[3].Errors)
		wantDiff(t, "line 6", []string{"spec.replicas: must be >= 0", "spec.replicas: is odd"}, lines[5].Errors)
		wantEqual(t, "line 6 text", lines[5].Text, "  replicas: 3")
	})
}

// ---- Small helpers ----

func TestKindTitle(t *testing.T) {
	res := func(kind, plural string) *resources.Resource {
		return &resources.Resource{GVK: schema.GroupVersionKind{Version: "v1", Kind: kind}, Plural: plural}
	}
	tests := []struct {
		res  *resources.Resource
		want string
	}{
		{res("Deployment", "deployments"), "Deployments"},
		{res("Ingress", "ingresses"), "Ingresses"},
		{res("NetworkPolicy", "networkpolicies"), "NetworkPolicies"},
		{res("EndpointSlice", "endpointslices"), "EndpointSlices"},
		{res("StorageClass", "storageclasses"), "StorageClasses"},
		{res("Endpoints", "endpoints"), "Endpoints"},
		{res("", "widgets"), "widgets"},
	}
	for _, tt := range tests {
		t.Run(tt.res.GVK.Kind, func(t *testing.T) { wantEqual(t, "kindTitle", kindTitle(tt.res), tt.want) })
	}
	// Every list the dashboard offers is titled with its plural, capitalized as its kind.
	for _, r := range resources.Default().All() {
		if r.Virtual || !r.HasVerb("list") {
			continue
		}
		t.Run("registered "+resourceKey(r), func(t *testing.T) {
			wantEqual(t, "lower-cased kindTitle", strings.ToLower(kindTitle(r)), r.Plural)
		})
	}
}

func TestSafeNext(t *testing.T) {
	tests := []struct{ next, want string }{
		{"/ui/c/x", "/ui/c/x"},
		{"/ui/t/t1/c/c1/r/pods?ns=default", "/ui/t/t1/c/c1/r/pods?ns=default"},
		{"/ui/", "/ui/"},
		{"", "/ui/"},
		{"//evil.com", "/ui/"},
		{"//evil.com/ui/", "/ui/"},
		{"https://evil.com", "/ui/"},
		{"https://evil.com/ui/", "/ui/"},
		{"javascript:alert(1)", "/ui/"},
		{`/ui/..\`, "/ui/"},
		{`/ui/\\evil.com`, "/ui/"},
		{`/\evil.com`, "/ui/"},
		{"/uievil", "/ui/"},
		{"/ui", "/ui/"},
	}
	for _, tt := range tests {
		t.Run(tt.next, func(t *testing.T) { wantEqual(t, "safeNext", safeNext(tt.next), tt.want) })
	}
}
