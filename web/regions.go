package web

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/a-h/templ"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
	"github.com/wheelhouse-dev/wheelhouse/server/watchcache"
	"github.com/wheelhouse-dev/wheelhouse/web/live"
)

// A region is a part of a page that updates live. The full page renders it with the same function the live
// connection uses to push it again, so the two never differ (one templ component per region).

// regionSpec is one kind of region.
type regionSpec struct {
	// deps are the collections the region shows (a change in any re-renders it).
	deps func(d *Dashboard, q url.Values) ([]dep, error)
	// render renders the region for s; an error wrapping *live.Gone means the user may not see it (or it is gone).
	render func(ctx context.Context, d *Dashboard, s *scope, q url.Values) (templ.Component, error)
}

// dep is a collection a region shows, narrowed to a namespace ("" for all).
type dep struct {
	res       *resources.Resource
	namespace string
}

// regionSpecs are the region kinds, by the name pages and the live protocol use.
var regionSpecs map[string]regionSpec

func init() {
	regionSpecs = map[string]regionSpec{
		"list":     {deps: listDeps, render: renderListRegion},
		"detail":   {deps: detailDeps, render: renderDetailRegion},
		"events":   {deps: eventsDeps, render: renderEventsRegion},
		"overview": {deps: overviewDeps, render: renderOverviewRegion},
	}
}

// gone is a region the user may not (or no longer) see.
func gone(format string, args ...any) error { return &live.Gone{Reason: fmt.Sprintf(format, args...)} }

// resource finds a resource by its key in dashboard URLs (resourceKey).
func (d *Dashboard) resource(key string) (*resources.Resource, error) {
	if r, ok := d.byKey[key]; ok {
		return r, nil
	}
	return nil, gone("There is no resource %q in this cluster.", key)
}

// collection is res's watch-cache collection in s's cluster.
func (d *Dashboard) collection(ctx context.Context, s *scope, res *resources.Resource) (*watchcache.Collection, error) {
	return d.cfg.API.Collection(ctx, s.cluster.ID, res)
}

// allow checks that s's user may do verb on res (in namespace, on name): a refusal is a *live.Gone saying so.
func (d *Dashboard) allow(ctx context.Context, s *scope, verb string, res *resources.Resource, namespace, name string) error {
	ok, _, err := d.can(ctx, s, verb, res, namespace, name)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	what := res.Plural
	if name != "" {
		what = res.Singular + " " + name
	}
	where := ""
	switch {
	case !res.Namespaced:
	case namespace == "":
		where = " in every namespace"
	default:
		where = " in namespace " + namespace
	}
	return gone("Your role does not allow you to %s %s%s (%s).", verb, what, where, s.user.Name)
}

func listDeps(d *Dashboard, q url.Values) ([]dep, error) {
	res, err := d.resource(q.Get("resource"))
	if err != nil {
		return nil, err
	}
	return []dep{{res: res, namespace: q.Get("ns")}}, nil
}

func renderListRegion(ctx context.Context, d *Dashboard, s *scope, q url.Values) (templ.Component, error) {
	lq := parseListQuery(q)
	res, err := d.resource(lq.Resource)
	if err != nil {
		return nil, err
	}
	if !validNamespace(lq.Namespace) {
		return nil, gone("%q is not a namespace name.", lq.Namespace)
	}
	ns := lq.Namespace
	if !res.Namespaced {
		ns = ""
	}
	if err := d.allow(ctx, s, "list", res, ns, ""); err != nil {
		return nil, err
	}
	col, err := d.collection(ctx, s, res)
	if err != nil {
		return nil, err
	}
	entries, _ := col.List(ns)
	return listTable(buildList(entries, res, s.cluster.ID, lq, d.cfg.Now())), nil
}

// regionError renders a region that cannot be shown on a full page: the reason of a *live.Gone, else err.
func regionError(err error) (templ.Component, error) {
	var g *live.Gone
	if errors.As(err, &g) {
		return goneMessage(g.Reason), nil
	}
	return nil, err
}

// cleanKey trims a resource key from a URL.
func cleanKey(k string) string { return strings.TrimSpace(k) }

// regionReason is the reason of a *live.Gone, for a page that shows it as an error.
func regionReason(err error) string {
	var g *live.Gone
	if errors.As(err, &g) {
		return g.Reason
	}
	return "You may not see this."
}
