package kubeapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// defaultTable is the table of a resource without its own columns: NAME and CREATED AT, as upstream's default.
var defaultTable = &resources.Table{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the object"},
		{Name: "Created At", Type: "date", Description: "The time the object was created"},
	},
}

// table converts objects to a meta.k8s.io/v1 Table. includeObject=Object|None|Metadata (default Metadata) says
// what each row carries in "object".
func (rq *request) table(items []runtime.Object, lm metav1.ListMeta) *metav1.Table {
	t := rq.res.Table
	if t == nil {
		t = defaultTable
	}
	now := rq.api.cfg.Now()
	out := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: lm,
		ColumnDefinitions: t.Columns, Rows: []metav1.TableRow{}}
	include := metav1.IncludeObjectPolicy(rq.r.URL.Query().Get("includeObject"))
	for _, obj := range items {
		m := mustAccessor(obj)
		var cells []any
		if t.Cells != nil {
			cells = t.Cells(obj, now)
		} else {
			cells = []any{m.GetName(), m.GetCreationTimestamp().UTC().Format("2006-01-02T15:04:05Z")}
		}
		row := metav1.TableRow{Cells: cells}
		switch include {
		case metav1.IncludeNone:
		case metav1.IncludeObject:
			row.Object = runtime.RawExtension{Object: obj}
		default:
			row.Object = runtime.RawExtension{Object: partial(obj)}
		}
		out.Rows = append(out.Rows, row)
	}
	return out
}
