package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	yamlv3 "go.yaml.in/yaml/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// YAML: view any object as the API serves it to the user, edit it (an update at its resourceVersion, as
// `kubectl edit`), create or apply many (server-side apply as field manager wheelhouse-dashboard, as
// `kubectl apply --server-side`), and preview with dryRun=All. Errors come back as the API's Status; each cause
// is shown under the YAML line of its field.

// maxYAML bounds the YAML a form may send (the API's own body limit is 3 MiB per object).
const maxYAML = 3 << 20

// applyView is the YAML page: the text and, after a submit, what happened to each document.
type applyView struct {
	Shell   shell
	Title   string
	Text    string
	Edit    bool // editing one object (update at its resourceVersion)
	Back    string
	DryRun  bool
	Force   bool
	Results []docResult
	Error   string
}

// docResult is the outcome of one YAML document.
type docResult struct {
	Index   int
	What    string // "Deployment default/web"
	Outcome string // "created", "configured", "unchanged", "would be created (dry run)", ...
	OK      bool
	Message string
	Lines   []yamlLine // the document with its causes under their lines, when it failed with field causes
	Href    string
}

type yamlLine struct {
	N      int
	Text   string
	Errors []string
}

func (d *Dashboard) applyPage(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	return d.render(c, http.StatusOK, applyPage(applyView{Shell: d.shell(s, "Create from YAML", "apply"), Title: "Create from YAML"}))
}

// yamlPage shows an object's YAML, editable.
func (d *Dashboard) yamlPage(c echo.Context) error {
	s, ref, res, ok, err := d.objectPage(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	dyn, err := dynamic.NewForConfig(d.userConfig(s))
	if err != nil {
		return d.internalError(c, err)
	}
	obj, err := dyn.Resource(res.GroupVersionResource()).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return d.apiErrorPage(c, err)
	}
	unstructured.RemoveNestedField(obj.Object, "metadata", "managedFields") // as kubectl get -o yaml
	b, err := yaml.Marshal(obj.Object)
	if err != nil {
		return d.internalError(c, err)
	}
	v := applyView{Shell: d.shell(s, res.GVK.Kind+" "+ref.Name, ref.Key), Title: "Edit " + res.GVK.Kind + " " + ref.Name,
		Text: string(b), Edit: true, Back: ref.href()}
	return d.render(c, http.StatusOK, applyPage(v))
}

// apiErrorPage shows an API refusal as a page with its status.
func (d *Dashboard) apiErrorPage(c echo.Context, err error) error {
	code := apiCode(err)
	if code >= 500 {
		return d.internalError(c, err)
	}
	return d.errorPage(c, code, http.StatusText(code), apiMessage(err))
}

// apply creates, updates or applies every document of the form's YAML.
func (d *Dashboard) apply(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	text := c.FormValue("yaml")
	v := applyView{Shell: d.shell(s, "Create from YAML", "apply"), Title: "Create from YAML", Text: text,
		DryRun: c.FormValue("dryRun") != "", Force: c.FormValue("force") != "", Edit: c.FormValue("edit") != "",
		Back: safeNext(c.FormValue("back"))}
	if v.Edit {
		v.Title = "Edit"
	}
	if len(text) > maxYAML {
		v.Error = "The YAML is larger than 3 MiB."
		return d.render(c, http.StatusRequestEntityTooLarge, applyPage(v))
	}
	docs, err := splitYAML(text)
	if err != nil {
		v.Error = err.Error()
		return d.render(c, http.StatusBadRequest, applyPage(v))
	}
	if len(docs) == 0 {
		v.Error = "There is nothing to apply: the YAML holds no object."
		return d.render(c, http.StatusBadRequest, applyPage(v))
	}
	dyn, err := dynamic.NewForConfig(d.userConfig(s))
	if err != nil {
		return d.internalError(c, err)
	}
	status := http.StatusOK
	for i, doc := range docs {
		r := d.applyDoc(c.Request().Context(), s, dyn, doc, v.Edit, v.DryRun, v.Force)
		r.Index = i + 1
		if !r.OK {
			status = http.StatusUnprocessableEntity
		}
		v.Results = append(v.Results, r)
	}
	return d.render(c, status, applyPage(v))
}

// yamlDoc is one document of a multi-document YAML, decoded, with its text for locating fields.
type yamlDoc struct {
	obj  *unstructured.Unstructured
	text string
}

var docSeparator = regexp.MustCompile(`(?m)^---(?:[ \t]+#.*)?[ \t]*$`)

// splitYAML decodes every non-empty document.
func splitYAML(text string) ([]yamlDoc, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n") // browsers submit a textarea's lines with CRLF
	parts := docSeparator.Split(text, -1)
	first := 1 // the number of parts[0]: none when the stream opens with "---"
	if strings.TrimSpace(stripComments(parts[0])) == "" {
		first = 0
	}
	var docs []yamlDoc
	for i, part := range parts {
		if strings.TrimSpace(stripComments(part)) == "" {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(part), 4096)
		var m map[string]any
		if err := dec.Decode(&m); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("document %d is not valid YAML: %v", i+first, err)
		}
		if m == nil {
			continue
		}
		docs = append(docs, yamlDoc{obj: &unstructured.Unstructured{Object: m}, text: strings.TrimLeft(part, "\n")})
	}
	return docs, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// applyDoc sends one document to the API.
func (d *Dashboard) applyDoc(ctx context.Context, s *scope, dyn dynamic.Interface, doc yamlDoc, edit, dryRun, force bool) docResult {
	obj := doc.obj
	gvk := obj.GroupVersionKind()
	r := docResult{What: strings.TrimSpace(gvk.Kind + " " + obj.GetName())}
	if gvk.Kind == "" || gvk.Version == "" {
		r.Message = "apiVersion and kind are required"
		r.Lines = annotate(doc.text, map[string][]string{"kind": {"required"}})
		return r
	}
	res, ok := d.byGVK[gvk]
	if !ok {
		r.Message = fmt.Sprintf("this cluster does not serve %s in %s", gvk.Kind, gvk.GroupVersion())
		return r
	}
	ns := obj.GetNamespace()
	if res.Namespaced && ns == "" {
		ns = "default"
		obj.SetNamespace(ns)
	}
	if res.Namespaced {
		r.What = fmt.Sprintf("%s %s/%s", gvk.Kind, ns, obj.GetName())
	}
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	ri := dyn.Resource(res.GroupVersionResource()).Namespace(ns)
	var err error
	var out *unstructured.Unstructured
	switch {
	case edit || obj.GetResourceVersion() != "":
		out, err = ri.Update(ctx, obj, metav1.UpdateOptions{DryRun: dry, FieldManager: fieldManager})
		r.Outcome = "edited"
	default:
		if obj.GetName() == "" {
			out, err = ri.Create(ctx, obj, metav1.CreateOptions{DryRun: dry, FieldManager: fieldManager})
			r.Outcome = "created"
			break
		}
		var body []byte
		if body, err = obj.MarshalJSON(); err == nil {
			existed := d.cachedObject(ctx, s, res, objectRef{Namespace: ns, Name: obj.GetName()}) != nil
			out, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{DryRun: dry, FieldManager: fieldManager, Force: &force})
			r.Outcome = "created"
			if existed {
				r.Outcome = "configured"
			}
		}
	}
	if err != nil {
		r.Message = apiMessage(err)
		if se := (apierrors.APIStatus)(nil); errors.As(err, &se) && se.Status().Details != nil {
			causes := map[string][]string{}
			for _, c := range se.Status().Details.Causes {
				if c.Field != "" {
					causes[c.Field] = append(causes[c.Field], c.Message)
				}
			}
			if len(causes) > 0 {
				r.Lines = annotate(doc.text, causes)
			}
		}
		if apierrors.IsConflict(err) && !edit {
			r.Message += " (tick \"take over fields\" to apply anyway)"
		}
		return r
	}
	r.OK = true
	if dryRun {
		r.Outcome += " (dry run: nothing was changed)"
	}
	if out != nil {
		r.What = strings.TrimSpace(gvk.Kind + " " + strings.TrimPrefix(out.GetNamespace()+"/"+out.GetName(), "/"))
		if !dryRun {
			r.Href = objectHref(s.cluster.ID, resourceKey(res), out.GetNamespace(), out.GetName())
		}
	}
	return r
}

// annotate splits a document into lines and puts each cause under the line of its field (or of the nearest
// parent the document has; on the first line when none).
func annotate(text string, causes map[string][]string) []yamlLine {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	out := make([]yamlLine, len(lines))
	for i, l := range lines {
		out[i] = yamlLine{N: i + 1, Text: l}
	}
	var root yamlv3.Node
	_ = yamlv3.Unmarshal([]byte(text), &root)
	for field, msgs := range causes {
		n := fieldLine(&root, field)
		if n < 1 || n > len(out) {
			n = 1
		}
		for _, m := range msgs {
			out[n-1].Errors = append(out[n-1].Errors, field+": "+m)
		}
	}
	return out
}

var pathPart = regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]|\[([^\]]*)\]`)

// fieldLine is the 1-based line of a field path ("spec.template.spec.containers[0].image") in a YAML node
// tree, or of its deepest ancestor present.
func fieldLine(root *yamlv3.Node, field string) int {
	n := root
	if n.Kind == yamlv3.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, m := range pathPart.FindAllStringSubmatch(field, -1) {
		switch {
		case m[1] != "" && n.Kind == yamlv3.MappingNode:
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == m[1] {
					line, n, found = n.Content[i].Line, n.Content[i+1], true
					break
				}
			}
			if !found {
				return line
			}
		case m[2] != "" && n.Kind == yamlv3.SequenceNode:
			i, _ := strconv.Atoi(m[2])
			if i >= len(n.Content) {
				return line
			}
			n = n.Content[i]
			line = n.Line
		default:
			return line
		}
	}
	return line
}

// userConfig is the in-process API client configuration of the scope's user.
func (d *Dashboard) userConfig(s *scope) *rest.Config {
	cfg := d.cfg.API.UserConfig(s.cluster.ID, s.user)
	cfg.UserAgent = "wheelhouse-dashboard"
	return cfg
}
