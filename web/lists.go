package web

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
)

// Lists are filtered, sorted and paged on the server from the watch cache's current state: only the shown page
// is turned into rows, so a namespace of 10,000 pods renders as fast as one of fifty (docs/design/dashboard.md).

// Page sizes offered; the first is the default.
var pageSizes = []int{50, 100, 500}

// listQuery is what a list shows: the URL query of its page and of its live region.
type listQuery struct {
	Resource  string // resource key (resourceKey)
	Namespace string // "" for every namespace
	Label     string // label selector
	Field     string // field selector
	Node      string // pods: spec.nodeName
	Phase     string // pods: status.phase
	Sort      string // column name ("" for name order)
	Desc      bool
	Page      int // 1-based
	Size      int
}

func parseListQuery(q url.Values) listQuery {
	lq := listQuery{Resource: q.Get("resource"), Namespace: q.Get("ns"), Label: q.Get("label"), Field: q.Get("field"),
		Node: q.Get("node"), Phase: q.Get("phase"), Sort: q.Get("sort"), Desc: q.Get("desc") == "1", Page: 1,
		Size: pageSizes[0]}
	if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 0 {
		lq.Page = p
	}
	if s, err := strconv.Atoi(q.Get("size")); err == nil && slices.Contains(pageSizes, s) {
		lq.Size = s
	}
	return lq
}

// fieldSelector is the field selector the filters make: the pods page's node and phase filters are field
// selectors, as kubectl's --field-selector.
func (lq listQuery) fieldSelector() string {
	var parts []string
	if lq.Field != "" {
		parts = append(parts, lq.Field)
	}
	if lq.Node != "" {
		parts = append(parts, "spec.nodeName="+lq.Node)
	}
	if lq.Phase != "" {
		parts = append(parts, "status.phase="+lq.Phase)
	}
	return strings.Join(parts, ",")
}

// values is lq as the page's URL query (the pager's and the column headers' links).
func (lq listQuery) values() url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("ns", lq.Namespace)
	set("label", lq.Label)
	set("field", lq.Field)
	set("node", lq.Node)
	set("phase", lq.Phase)
	set("sort", lq.Sort)
	if lq.Desc {
		v.Set("desc", "1")
	}
	if lq.Page > 1 {
		v.Set("page", strconv.Itoa(lq.Page))
	}
	if lq.Size != pageSizes[0] {
		v.Set("size", strconv.Itoa(lq.Size))
	}
	return v
}

// regionParams is lq as its live region's parameters: the page's query, the resource and the cluster.
func (lq listQuery) regionParams(cluster string) string {
	v := lq.values()
	v.Set("resource", lq.Resource)
	v.Set("cluster", cluster)
	return v.Encode()
}

// listView is a rendered list: the columns kubectl shows and one page of rows.
type listView struct {
	Cluster     string
	Res         *resources.Resource
	Key         string // resource key
	Query       listQuery
	Columns     []column
	Rows        []row
	Total       int // objects matching the filters
	Pages       int
	AllNS       bool   // rows carry a namespace column
	FilterErr   string // a selector that does not parse
	GeneratedAt time.Time
}

type column struct {
	Name   string
	Wide   bool // kubectl -o wide only: hidden on narrow screens
	Sorted bool
	Desc   bool
	Href   string // sorts by it
}

type row struct {
	Namespace, Name string
	Href            string
	Cells           []string
	Status          string // ok, warn, bad or "" for the status-like cell's badge
	StatusCol       int    // index of the status-like column, -1 without one
}

// resourceKey names a resource in dashboard URLs: its plural, with its group for non-core groups
// ("deployments.apps"), as kubectl spells resource.group.
func resourceKey(r *resources.Resource) string {
	if r.GVK.Group == "" {
		return r.Plural
	}
	return r.Plural + "." + r.GVK.Group
}

// buildList filters, sorts and pages entries (a collection's objects in lq's namespace, in key order) by lq.
func buildList(entries []*watchcache.Entry, res *resources.Resource, cluster string, lq listQuery, now time.Time) listView {
	lv := listView{Cluster: cluster, Res: res, Key: resourceKey(res), Query: lq, AllNS: res.Namespaced && lq.Namespace == "",
		GeneratedAt: now}
	ls, fs, err := parseSelectors(lq.Label, lq.fieldSelector())
	if err != nil {
		lv.FilterErr = err.Error()
		ls, fs = labels.Everything(), fields.Everything()
	}
	matched := entries
	if !ls.Empty() || !fs.Empty() {
		matched = make([]*watchcache.Entry, 0, len(entries))
		for _, e := range entries {
			if matches(res, e, ls, fs) {
				matched = append(matched, e)
			}
		}
	}
	cols := tableColumns(res)
	sortIdx := -1
	for i, c := range cols {
		if strings.EqualFold(c.Name, lq.Sort) {
			sortIdx = i
		}
	}
	switch {
	case strings.EqualFold(lq.Sort, "age") || (sortIdx >= 0 && cols[sortIdx].Name == "Age"):
		matched = slices.Clone(matched)
		slices.SortStableFunc(matched, func(a, b *watchcache.Entry) int {
			return -creation(a.Object).Compare(creation(b.Object)) // youngest first, as an age ascending
		})
	case sortIdx > 0:
		// Sorting by a computed column computes it for every match (once each).
		keyed := make([]struct {
			e *watchcache.Entry
			v string
		}, len(matched))
		for i, e := range matched {
			keyed[i].e, keyed[i].v = e, cellString(tableCells(res, e.Object, now)[sortIdx])
		}
		slices.SortStableFunc(keyed, func(a, b struct {
			e *watchcache.Entry
			v string
		}) int {
			return naturalCompare(a.v, b.v)
		})
		matched = make([]*watchcache.Entry, len(keyed))
		for i := range keyed {
			matched[i] = keyed[i].e
		}
	}
	if lq.Desc {
		matched = slices.Clone(matched)
		slices.Reverse(matched)
	}
	lv.Total = len(matched)
	lv.Pages = max(1, (lv.Total+lq.Size-1)/lq.Size)
	page := min(lq.Page, lv.Pages)
	lv.Query.Page = page
	start := (page - 1) * lq.Size
	end := min(start+lq.Size, lv.Total)
	for i, c := range cols {
		q := lq
		q.Sort, q.Desc, q.Page = c.Name, false, 1
		if i == 0 {
			q.Sort = ""
		}
		sorted := (i == 0 && lq.Sort == "") || (i == sortIdx && i > 0) || (c.Name == "Age" && strings.EqualFold(lq.Sort, "age"))
		if sorted {
			q.Desc = !lq.Desc
		}
		lv.Columns = append(lv.Columns, column{Name: c.Name, Wide: c.Priority > 0, Sorted: sorted, Desc: sorted && lq.Desc,
			Href: "?" + q.values().Encode()})
	}
	statusCol := statusColumn(cols)
	for _, e := range matched[start:end] {
		cells := tableCells(res, e.Object, now)
		r := row{Namespace: e.Namespace, Name: e.Name, Href: objectHref(cluster, lv.Key, e.Namespace, e.Name),
			StatusCol: statusCol}
		for _, c := range cells {
			r.Cells = append(r.Cells, cellString(c))
		}
		if statusCol >= 0 && statusCol < len(r.Cells) {
			r.Status = statusClass(r.Cells[statusCol])
		}
		lv.Rows = append(lv.Rows, r)
	}
	return lv
}

// parseSelectors parses a label and a field selector, with messages fit to show next to the filter.
func parseSelectors(label, field string) (labels.Selector, fields.Selector, error) {
	ls, err := labels.Parse(label)
	if err != nil {
		return nil, nil, fmt.Errorf("label selector: %v", err)
	}
	fs, err := fields.ParseSelector(field)
	if err != nil {
		return nil, nil, fmt.Errorf("field selector: %v", err)
	}
	return ls, fs, nil
}

// matches applies a label and a field selector to a cached object, with the fields the API serves for it.
func matches(res *resources.Resource, e *watchcache.Entry, ls labels.Selector, fs fields.Selector) bool {
	m, err := meta.Accessor(e.Object)
	if err != nil {
		return false
	}
	if !ls.Matches(labels.Set(m.GetLabels())) {
		return false
	}
	if fs.Empty() {
		return true
	}
	set := fields.Set{"metadata.name": m.GetName()}
	if res.Namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	if res.Fields != nil {
		for k, v := range res.Fields(e.Object) {
			set[k] = v
		}
	}
	return fs.Matches(set)
}

// tableColumns are kubectl's columns of res (NAME and AGE for resources without their own).
func tableColumns(res *resources.Resource) []metav1.TableColumnDefinition {
	if res.Table != nil {
		return res.Table.Columns
	}
	return []metav1.TableColumnDefinition{{Name: "Name"}, {Name: "Age"}}
}

func tableCells(res *resources.Resource, obj runtime.Object, now time.Time) []any {
	if res.Table != nil {
		return res.Table.Cells(obj, now)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return []any{"", ""}
	}
	return []any{m.GetName(), humanAge(m.GetCreationTimestamp(), now)}
}

func cellString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func creation(obj runtime.Object) time.Time {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetCreationTimestamp().Time
	}
	return time.Time{}
}

// naturalCompare orders strings with their leading numbers compared as numbers ("9" < "10", "2 (5m ago)" < "10").
func naturalCompare(a, b string) int {
	na, ra := leadingInt(a)
	nb, rb := leadingInt(b)
	if ra > 0 && rb > 0 && na != nb {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

func leadingInt(s string) (int64, int) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' && i < 18 {
		i++
	}
	if i == 0 {
		return 0, 0
	}
	n, _ := strconv.ParseInt(s[:i], 10, 64)
	return n, i
}

// statusColumn is the index of the column whose value is a state worth a colour (Status, Ready for nodes).
func statusColumn(cols []metav1.TableColumnDefinition) int {
	for i, c := range cols {
		if c.Name == "Status" {
			return i
		}
	}
	return -1
}

// statusClass colours a status as kubectl users read it.
func statusClass(s string) string {
	switch {
	case s == "Running" || s == "Ready" || s == "Completed" || s == "Succeeded" || s == "Active" || s == "Bound" ||
		s == "Complete" || s == "True":
		return "ok"
	case strings.Contains(s, "Err") || strings.Contains(s, "BackOff") || s == "Failed" || s == "OOMKilled" ||
		strings.HasPrefix(s, "NotReady") || s == "Evicted" || s == "Unschedulable" || s == "False" ||
		strings.HasSuffix(s, "InvalidImageName"):
		return "bad"
	case s == "Pending" || s == "ContainerCreating" || s == "PodInitializing" || s == "Terminating" ||
		strings.HasPrefix(s, "Init:") || strings.Contains(s, "SchedulingDisabled") || s == "Unknown":
		return "warn"
	}
	return ""
}

// objectHref is an object's detail page ("-" stands for no namespace).
func objectHref(cluster, key, namespace, name string) string {
	if namespace == "" {
		namespace = "-"
	}
	return Prefix + "/c/" + url.PathEscape(cluster) + "/r/" + url.PathEscape(key) + "/" + url.PathEscape(namespace) + "/" +
		url.PathEscape(name)
}

// validNamespace reports whether ns can be a namespace name ("" means every namespace).
func validNamespace(ns string) bool { return ns == "" || len(validation.IsDNS1123Label(ns)) == 0 }

// pageHref links to page n of the same list.
func (lv listView) pageHref(n int) string {
	q := lv.Query
	q.Page = n
	return "?" + q.values().Encode()
}
