package web

import (
	"bytes"
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Component tests: each renders a templ component from the view its build function makes of Kubernetes objects,
// parses the HTML as a browser does (goquery) and reads it by data-testid. The clock is fixedNow, so ages read as
// kubectl prints them ("90s", "2d4h", "3 (5m ago)").

var fixedNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func ago(d time.Duration) metav1.Time { return metav1.NewTime(fixedNow.Add(-d)) }

// renderDoc renders c and parses it; raw is the HTML as sent.
func renderDoc(t *testing.T, c templ.Component) (doc *goquery.Document, raw string) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(t.Context(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	raw = buf.String()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return doc, raw
}

// byTestID selects the elements under s with data-testid=id.
func byTestID(s *goquery.Selection, id string) *goquery.Selection {
	return s.Find(fmt.Sprintf("[data-testid=%q]", id))
}

// textOf is s's text as a reader sees it: runs of white space are one space.
func textOf(s *goquery.Selection) string { return strings.Join(strings.Fields(s.Text()), " ") }

func textsOf(s *goquery.Selection) []string {
	return s.Map(func(_ int, e *goquery.Selection) string { return textOf(e) })
}

// badgeClass is the colour of a badge: its classes other than "badge" ("" for none or no badge).
func badgeClass(s *goquery.Selection) string {
	var out []string
	for _, c := range strings.Fields(s.AttrOr("class", "")) {
		if c != "badge" {
			out = append(out, c)
		}
	}
	return strings.Join(out, " ")
}

func wantEqual[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %#v, want %#v", what, got, want)
	}
}

// wantDiff compares with go-cmp; an empty slice equals a nil one.
func wantDiff[T any](t *testing.T, what string, want, got T) {
	t.Helper()
	if d := gocmp.Diff(want, got, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

func registered(t testing.TB, gvr schema.GroupVersionResource) *resources.Resource {
	t.Helper()
	r, ok := resources.Default().Lookup(gvr)
	if !ok {
		t.Fatalf("the registry has no %v", gvr)
	}
	return r
}

// entriesOf is objs as a watch-cache collection lists them: in (namespace, name) order.
func entriesOf(objs ...runtime.Object) []*watchcache.Entry {
	out := make([]*watchcache.Entry, 0, len(objs))
	for i, o := range objs {
		m, _ := meta.Accessor(o)
		out = append(out, watchcache.NewEntry(store.Object{Key: store.Key{Cluster: "c1", Namespace: m.GetNamespace(),
			Name: m.GetName()}, Revision: int64(i + 1)}, o))
	}
	slices.SortFunc(out, func(a, b *watchcache.Entry) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}

// inNamespace is what Collection.List(ns) returns of entries.
func inNamespace(entries []*watchcache.Entry, ns string) []*watchcache.Entry {
	return slices.DeleteFunc(slices.Clone(entries), func(e *watchcache.Entry) bool { return e.Namespace != ns })
}

type podOpt func(*corev1.Pod)

// mkPod is a pending pod with one container, created age ago.
func mkPod(ns, name string, age time.Duration, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: ago(age),
			Labels: map[string]string{}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func labelled(k, v string) podOpt { return func(p *corev1.Pod) { p.Labels[k] = v } }

// onNode binds the pod to node, running with ip.
func onNode(node, ip string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status.Phase, p.Status.PodIP = node, corev1.PodRunning, ip
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
}

// runningReady: every container running and ready since the given time ago.
func runningReady(since time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
				Image: c.Image, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(since)}}})
		}
	}
}

// crashLooping: every container waiting in CrashLoopBackOff after restarts, the last exit lastExit ago.
func crashLooping(restarts int32, lastExit time.Duration) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = nil
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
				Image: c.Image, RestartCount: restarts,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1,
					Reason: "Error", FinishedAt: ago(lastExit)}}})
		}
	}
}

// listPods: in default a running pod, a crash-looping one and a pending one; a running pod in kube-system.
func listPods() []*watchcache.Entry {
	return entriesOf(
		mkPod("default", "web-1", 3*day, labelled("app", "web"), onNode("node-1", "10.0.0.11"), runningReady(3*day)),
		mkPod("default", "web-2", 52*time.Hour, labelled("app", "web"), onNode("node-2", "10.0.0.12"), crashLooping(3, 5*time.Minute)),
		mkPod("default", "db-0", 90*time.Second, labelled("app", "db")),
		mkPod("kube-system", "coredns-1", 10*day, labelled("k8s-app", "kube-dns"), onNode("node-1", "10.0.0.2"), runningReady(10*day)),
	)
}

func podsResource(t testing.TB) *resources.Resource {
	return registered(t, corev1.SchemeGroupVersion.WithResource("pods"))
}

// renderList builds the list region of entries for lq and renders it.
func renderList(t *testing.T, res *resources.Resource, entries []*watchcache.Entry, lq listQuery) (listView, *goquery.Document) {
	t.Helper()
	lq.Resource = resourceKey(res)
	if lq.Page == 0 {
		lq.Page = 1
	}
	if lq.Size == 0 {
		lq.Size = pageSizes[0]
	}
	lv := buildList(entries, res, "c1", lq, fixedNow)
	doc, _ := renderDoc(t, listTable(lv))
	return lv, doc
}

type listHeader struct {
	Name, AriaSort string
	Wide           bool
}

func listHeaders(doc *goquery.Document) []listHeader {
	var out []listHeader
	byTestID(doc.Selection, "list-table").Find("thead th").Each(func(_ int, th *goquery.Selection) {
		out = append(out, listHeader{Name: strings.TrimRight(textOf(th), " ▲▼"), AriaSort: th.AttrOr("aria-sort", ""),
			Wide: th.HasClass("hide-narrow")})
	})
	return out
}

func rowNames(doc *goquery.Document) []string {
	return byTestID(doc.Selection, "row").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("data-name", "") })
}

// podRow is a pods list row as a reader sees it.
type podRow struct {
	Namespace, Name, Href                              string
	Ready, Status, Badge, Restarts, Age, IP, Node      string
	NominatedNode, ReadinessGates, NamespaceCell, Wide string
}

func podRows(doc *goquery.Document, allNS bool) []podRow {
	var out []podRow
	byTestID(doc.Selection, "row").Each(func(_ int, tr *goquery.Selection) {
		cell := func(col string) string { return textOf(byTestID(tr, "cell-"+col)) }
		r := podRow{Namespace: tr.AttrOr("data-namespace", ""), Name: textOf(byTestID(tr, "row-link")),
			Href: byTestID(tr, "row-link").AttrOr("href", ""), Ready: cell("Ready"), Status: cell("Status"),
			Badge: badgeClass(byTestID(tr, "cell-Status").Find(".badge")), Restarts: cell("Restarts"), Age: cell("Age"),
			IP: cell("IP"), Node: cell("Node"), NominatedNode: cell("Nominated Node"), ReadinessGates: cell("Readiness Gates")}
		if allNS {
			r.NamespaceCell = textOf(tr.Find("td").First())
		}
		var wide []string
		tr.Find("td.hide-narrow").Each(func(_ int, td *goquery.Selection) { wide = append(wide, td.AttrOr("data-testid", "")) })
		r.Wide = strings.Join(wide, ",")
		out = append(out, r)
	})
	return out
}

func TestListTableColumns(t *testing.T) {
	pods := podsResource(t)
	nodes := registered(t, corev1.SchemeGroupVersion.WithResource("nodes"))
	kubectl := []listHeader{{"Name", "ascending", false}, {"Ready", "none", false}, {"Status", "none", false},
		{"Restarts", "none", false}, {"Age", "none", false}, {"IP", "none", true}, {"Node", "none", true},
		{"Nominated Node", "none", true}, {"Readiness Gates", "none", true}}
	tests := []struct {
		name    string
		res     *resources.Resource
		ns      string
		entries []*watchcache.Entry
		want    []listHeader
	}{
		{"pods in one namespace", pods, "default", inNamespace(listPods(), "default"), kubectl},
		{"pods in every namespace", pods, "", listPods(), append([]listHeader{{"Namespace", "", false}}, kubectl...)},
		{"nodes are cluster-scoped", nodes, "", entriesOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}),
			[]listHeader{{"Name", "ascending", false}, {"Status", "none", false}, {"Roles", "none", false},
				{"Age", "none", false}, {"Version", "none", false}, {"Internal-IP", "none", true},
				{"External-IP", "none", true}, {"OS-Image", "none", true}, {"Kernel-Version", "none", true},
				{"Container-Runtime", "none", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := renderList(t, tt.res, tt.entries, listQuery{Namespace: tt.ns})
			wantDiff(t, "header", tt.want, listHeaders(doc))
		})
	}
}

func TestListTablePodCells(t *testing.T) {
	const wide = "cell-IP,cell-Node,cell-Nominated Node,cell-Readiness Gates"
	running := podRow{Namespace: "default", Name: "web-1", Href: "/ui/c/c1/r/pods/default/web-1", Ready: "1/1",
		Status: "Running", Badge: "ok", Restarts: "0", Age: "3d", IP: "10.0.0.11", Node: "node-1",
		NominatedNode: "<none>", ReadinessGates: "<none>", Wide: wide}
	crashing := podRow{Namespace: "default", Name: "web-2", Href: "/ui/c/c1/r/pods/default/web-2", Ready: "0/1",
		Status: "CrashLoopBackOff", Badge: "bad", Restarts: "3 (5m ago)", Age: "2d4h", IP: "10.0.0.12", Node: "node-2",
		NominatedNode: "<none>", ReadinessGates: "<none>", Wide: wide}
	pending := podRow{Namespace: "default", Name: "db-0", Href: "/ui/c/c1/r/pods/default/db-0", Ready: "0/1",
		Status: "Pending", Badge: "warn", Restarts: "0", Age: "90s", IP: "<none>", Node: "<none>",
		NominatedNode: "<none>", ReadinessGates: "<none>", Wide: wide}
	coredns := podRow{Namespace: "kube-system", Name: "coredns-1", Href: "/ui/c/c1/r/pods/kube-system/coredns-1",
		Ready: "1/1", Status: "Running", Badge: "ok", Restarts: "0", Age: "10d", IP: "10.0.0.2", Node: "node-1",
		NominatedNode: "<none>", ReadinessGates: "<none>", Wide: wide}
	withNS := func(r podRow) podRow { r.NamespaceCell = r.Namespace; return r }
	tests := []struct {
		name string
		ns   string
		want []podRow
	}{
		{"one namespace", "default", []podRow{pending, running, crashing}},
		{"every namespace", "", []podRow{withNS(pending), withNS(running), withNS(crashing), withNS(coredns)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := listPods()
			if tt.ns != "" {
				entries = inNamespace(entries, tt.ns)
			}
			lv, doc := renderList(t, podsResource(t), entries, listQuery{Namespace: tt.ns})
			wantDiff(t, "rows", tt.want, podRows(doc, lv.AllNS))
			wantEqual(t, "data-total", byTestID(doc.Selection, "list-table").AttrOr("data-total", ""), fmt.Sprint(len(tt.want)))
			wantEqual(t, "empty state shown", byTestID(doc.Selection, "empty").Length(), 0)
		})
	}
}

func TestListTableEmpty(t *testing.T) {
	pods, nodes := podsResource(t), registered(t, corev1.SchemeGroupVersion.WithResource("nodes"))
	tests := []struct {
		name    string
		res     *resources.Resource
		entries []*watchcache.Entry
		lq      listQuery
		want    string
	}{
		{"no pods anywhere", pods, nil, listQuery{}, "No pods yet."},
		{"no pods in the namespace", pods, nil, listQuery{Namespace: "prod"}, "No pods in namespace prod."},
		{"label selector matches nothing", pods, listPods(), listQuery{Label: "app=nothing"}, "No pods match these filters."},
		{"node filter matches nothing", pods, inNamespace(listPods(), "default"), listQuery{Namespace: "default", Node: "node-9"},
			"No pods match these filters."},
		{"phase filter matches nothing", pods, listPods(), listQuery{Phase: "Failed"}, "No pods match these filters."},
		{"no nodes", nodes, nil, listQuery{}, "No nodes yet."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := renderList(t, tt.res, tt.entries, tt.lq)
			wantEqual(t, "rows", byTestID(doc.Selection, "row").Length(), 0)
			wantEqual(t, "empty state", textOf(byTestID(doc.Selection, "empty")), tt.want)
			wantEqual(t, "count", textOf(byTestID(doc.Selection, "count")), "0 "+tt.res.Plural)
		})
	}
}

func TestListTableFilterError(t *testing.T) {
	tests := []struct {
		name, wantPrefix string
		lq               listQuery
	}{
		{"label selector", "label selector: ", listQuery{Label: "app in (web"}},
		{"field selector", "field selector: ", listQuery{Field: "status.phase"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lv, doc := renderList(t, podsResource(t), listPods(), tt.lq)
			msg := byTestID(doc.Selection, "filter-error")
			if !strings.HasPrefix(textOf(msg), tt.wantPrefix) {
				t.Errorf("filter error %q, want it to start with %q", textOf(msg), tt.wantPrefix)
			}
			wantEqual(t, "filter error role", msg.AttrOr("role", ""), "alert")
			wantEqual(t, "FilterErr", lv.FilterErr, textOf(msg))
			// The list stays usable: every pod, unfiltered.
			wantDiff(t, "rows", []string{"db-0", "web-1", "web-2", "coredns-1"}, rowNames(doc))
		})
	}
}

func TestListTableFilters(t *testing.T) {
	tests := []struct {
		name string
		lq   listQuery
		want []string
	}{
		{"label equals", listQuery{Label: "app=web"}, []string{"web-1", "web-2"}},
		{"label not equals", listQuery{Label: "app!=web"}, []string{"db-0", "coredns-1"}},
		{"label exists", listQuery{Label: "k8s-app"}, []string{"coredns-1"}},
		{"node", listQuery{Node: "node-1"}, []string{"web-1", "coredns-1"}},
		{"phase", listQuery{Phase: "Pending"}, []string{"db-0"}},
		{"label and phase", listQuery{Label: "app=web", Phase: "Running"}, []string{"web-1", "web-2"}},
		{"label and node", listQuery{Label: "app=web", Node: "node-2"}, []string{"web-2"}},
		{"field selector on the name", listQuery{Field: "metadata.name=web-2"}, []string{"web-2"}},
		{"field selector on the namespace", listQuery{Field: "metadata.namespace=kube-system"}, []string{"coredns-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lv, doc := renderList(t, podsResource(t), listPods(), tt.lq)
			wantDiff(t, "rows", tt.want, rowNames(doc))
			wantEqual(t, "Total", lv.Total, len(tt.want))
			wantEqual(t, "filter error", byTestID(doc.Selection, "filter-error").Length(), 0)
		})
	}
}

func TestListTableSort(t *testing.T) {
	// Restarts 9, 10, 2 and 0: a string sort would put "10 (5m ago)" first.
	entries := entriesOf(
		mkPod("default", "alpha", 10*time.Minute, onNode("node-1", "10.0.0.1"), crashLooping(9, 5*time.Minute)),
		mkPod("default", "bravo", time.Hour, onNode("node-1", "10.0.0.2"), crashLooping(10, 5*time.Minute)),
		mkPod("default", "charlie", 2*day, onNode("node-1", "10.0.0.3"), crashLooping(2, 5*time.Minute)),
		mkPod("default", "delta", 30*time.Second, onNode("node-1", "10.0.0.4"), runningReady(30*time.Second)),
	)
	tests := []struct {
		name      string
		sort      string
		desc      bool
		want      []string
		sortedCol string // the header marked sorted
		wantAria  string
	}{
		{"name order", "", false, []string{"alpha", "bravo", "charlie", "delta"}, "Name", "ascending"},
		{"name order reversed", "", true, []string{"delta", "charlie", "bravo", "alpha"}, "Name", "descending"},
		{"age: youngest first", "Age", false, []string{"delta", "alpha", "bravo", "charlie"}, "Age", "ascending"},
		{"age reversed: oldest first", "Age", true, []string{"charlie", "bravo", "alpha", "delta"}, "Age", "descending"},
		{"age in lower case", "age", false, []string{"delta", "alpha", "bravo", "charlie"}, "Age", "ascending"},
		{"restarts numerically", "Restarts", false, []string{"delta", "charlie", "alpha", "bravo"}, "Restarts", "ascending"},
		{"restarts reversed", "Restarts", true, []string{"bravo", "alpha", "charlie", "delta"}, "Restarts", "descending"},
		{"status", "Status", false, []string{"alpha", "bravo", "charlie", "delta"}, "Status", "ascending"},
		{"status reversed", "Status", true, []string{"delta", "charlie", "bravo", "alpha"}, "Status", "descending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, doc := renderList(t, podsResource(t), entries, listQuery{Namespace: "default", Sort: tt.sort, Desc: tt.desc})
			wantDiff(t, "rows", tt.want, rowNames(doc))
			for _, h := range listHeaders(doc) {
				want := "none"
				if h.Name == tt.sortedCol {
					want = tt.wantAria
				}
				wantEqual(t, h.Name+" aria-sort", h.AriaSort, want)
			}
		})
	}
}

// The sorted column's header link flips the order; another column's sorts by it ascending from page 1.
func TestListTableSortLinks(t *testing.T) {
	_, doc := renderList(t, podsResource(t), inNamespace(listPods(), "default"),
		listQuery{Namespace: "default", Sort: "Restarts", Page: 1})
	links := map[string]url.Values{}
	byTestID(doc.Selection, "list-table").Find("thead th a").Each(func(_ int, a *goquery.Selection) {
		q, err := url.ParseQuery(strings.TrimPrefix(a.AttrOr("href", ""), "?"))
		if err != nil {
			t.Errorf("header link %q: %v", a.AttrOr("href", ""), err)
		}
		links[strings.TrimRight(textOf(a), " ▲▼")] = q
	})
	wantDiff(t, "Restarts link", url.Values{"ns": {"default"}, "sort": {"Restarts"}, "desc": {"1"}}, links["Restarts"])
	wantDiff(t, "Age link", url.Values{"ns": {"default"}, "sort": {"Age"}}, links["Age"])
	wantDiff(t, "Name link", url.Values{"ns": {"default"}}, links["Name"])
}

func TestNaturalCompare(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"9", "10", -1},
		{"10", "9", 1},
		{"2 (5m ago)", "10 (1m ago)", -1},
		{"10 (5m ago)", "10 (1m ago)", 1}, // equal numbers: the rest compares as text
		{"10", "10", 0},
		{"abc", "abd", -1},
		{"a10", "a9", -1}, // no leading number: plain text order
		{"", "1", -1},
		{"0", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			wantEqual(t, "naturalCompare", naturalCompare(tt.a, tt.b), tt.want)
		})
	}
}

func TestStatusClass(t *testing.T) {
	tests := []struct{ status, want string }{
		{"Running", "ok"},
		{"Completed", "ok"},
		{"Succeeded", "ok"},
		{"Ready", "ok"},
		{"Bound", "ok"},
		{"Pending", "warn"},
		{"ContainerCreating", "warn"},
		{"PodInitializing", "warn"},
		{"Init:0/2", "warn"},
		{"Terminating", "warn"},
		{"Unknown", "warn"},
		{"Ready,SchedulingDisabled", "warn"},
		{"CrashLoopBackOff", "bad"},
		{"ImagePullBackOff", "bad"},
		{"ErrImagePull", "bad"},
		{"CreateContainerConfigError", "bad"},
		{"Error", "bad"},
		{"OOMKilled", "bad"},
		{"Evicted", "bad"},
		{"Failed", "bad"},
		{"NotReady", "bad"},
		{"Init:CrashLoopBackOff", "bad"},
		{"Init:Error", "bad"},
		{"1/1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.status, func(t *testing.T) { wantEqual(t, "statusClass", statusClass(tt.status), tt.want) })
	}
}

func TestHumanAge(t *testing.T) {
	tests := []struct {
		age  time.Duration
		want string
	}{
		{90 * time.Second, "90s"},
		{5 * time.Minute, "5m"},
		{5*time.Minute + 30*time.Second, "5m30s"},
		{3 * time.Hour, "3h"},
		{52 * time.Hour, "2d4h"},
		{3 * day, "3d"},
		{30 * day, "30d"},
		{800 * day, "2y70d"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) { wantEqual(t, "humanAge", humanAge(ago(tt.age), fixedNow), tt.want) })
	}
	t.Run("unset", func(t *testing.T) { wantEqual(t, "humanAge", humanAge(metav1.Time{}, fixedNow), "<unknown>") })
}

func TestListTablePaging(t *testing.T) {
	var objs []runtime.Object
	for i := range 120 {
		objs = append(objs, mkPod("default", fmt.Sprintf("pod-%03d", i), time.Hour, onNode("node-1", "10.0.0.1"), runningReady(time.Hour)))
	}
	entries := entriesOf(objs...)
	tests := []struct {
		name                string
		page, size          int
		wantPage, wantPages int
		wantRows            int
		wantFirst           string
		wantNext, wantPrev  string // the links' hrefs, "" for none
	}{
		{"first page", 1, 50, 1, 3, 50, "pod-000", "?ns=default&page=2", ""},
		{"middle page", 2, 50, 2, 3, 50, "pod-050", "?ns=default&page=3", "?ns=default"},
		{"last page", 3, 50, 3, 3, 20, "pod-100", "", "?ns=default&page=2"},
		{"beyond the end clamps to the last", 9, 50, 3, 3, 20, "pod-100", "", "?ns=default&page=2"},
		{"size 100", 2, 100, 2, 2, 20, "pod-100", "", "?ns=default&size=100"},
		{"size 500: one page", 1, 500, 1, 1, 120, "pod-000", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lv, doc := renderList(t, podsResource(t), entries, listQuery{Namespace: "default", Page: tt.page, Size: tt.size})
			wantEqual(t, "Pages", lv.Pages, tt.wantPages)
			wantEqual(t, "Query.Page", lv.Query.Page, tt.wantPage)
			names := rowNames(doc)
			wantEqual(t, "rows", len(names), tt.wantRows)
			if len(names) > 0 {
				wantEqual(t, "first row", names[0], tt.wantFirst)
			}
			wantEqual(t, "data-total", byTestID(doc.Selection, "list-table").AttrOr("data-total", ""), "120")
			wantEqual(t, "count", textOf(byTestID(doc.Selection, "count")), "120 pods")
			pager := byTestID(doc.Selection, "pager")
			wantEqual(t, "next link", byTestID(pager, "next-page").AttrOr("href", ""), tt.wantNext)
			wantEqual(t, "previous link", pager.Find("a[rel=prev]").AttrOr("href", ""), tt.wantPrev)
			if tt.wantPages > 1 {
				if want := fmt.Sprintf("Page %d of %d", tt.wantPage, tt.wantPages); !strings.Contains(textOf(pager), want) {
					t.Errorf("pager %q does not say %q", textOf(pager), want)
				}
			}
		})
	}
}

func TestListQueryRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		lq   listQuery
	}{
		{"defaults", listQuery{Resource: "pods", Page: 1, Size: 50}},
		{"every field", listQuery{Resource: "deployments.apps", Namespace: "prod", Label: "app=web,tier!=db",
			Field: "metadata.name=web", Node: "node-1", Phase: "Running", Sort: "Restarts", Desc: true, Page: 3, Size: 500}},
		{"characters a URL escapes", listQuery{Resource: "pods", Label: "app in (a, b),!canary", Field: "spec.nodeName=n&1",
			Page: 2, Size: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := url.ParseQuery(tt.lq.regionParams("c1"))
			if err != nil {
				t.Fatal(err)
			}
			wantDiff(t, "parseListQuery(regionParams)", tt.lq, parseListQuery(q))
			wantEqual(t, "cluster", q.Get("cluster"), "c1")
			page := tt.lq
			page.Resource = q.Get("resource") // the page's own query names no resource: its path does
			wantDiff(t, "parseListQuery(values)", page, parseListQuery(withResource(tt.lq.values(), tt.lq.Resource)))
		})
	}
}

func withResource(v url.Values, res string) url.Values {
	v.Set("resource", res)
	return v
}

func TestParseListQueryDefaults(t *testing.T) {
	tests := []struct {
		query            string
		wantPage, wantSz int
		wantDesc         bool
	}{
		{"", 1, 50, false},
		{"page=0", 1, 50, false},
		{"page=-2", 1, 50, false},
		{"page=x", 1, 50, false},
		{"page=7&size=100", 7, 100, false},
		{"size=7", 1, 50, false},
		{"size=500", 1, 500, false},
		{"desc=1", 1, 50, true},
		{"desc=true", 1, 50, false},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			q, _ := url.ParseQuery(tt.query)
			lq := parseListQuery(q)
			wantEqual(t, "Page", lq.Page, tt.wantPage)
			wantEqual(t, "Size", lq.Size, tt.wantSz)
			wantEqual(t, "Desc", lq.Desc, tt.wantDesc)
		})
	}
	t.Run("node and phase are field selectors", func(t *testing.T) {
		lq := listQuery{Field: "metadata.name=a", Node: "node-1", Phase: "Running"}
		wantEqual(t, "fieldSelector", lq.fieldSelector(), "metadata.name=a,spec.nodeName=node-1,status.phase=Running")
	})
}

// ---- Details ----
