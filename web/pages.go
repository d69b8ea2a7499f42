package web

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/wheelhouse-dev/wheelhouse/server/resources"
)

// home sends the user to their first team's first cluster (or the team page when it has none).
func (d *Dashboard) home(c echo.Context) error {
	ctx := c.Request().Context()
	v := viewerOf(c)
	teams, err := d.cfg.Tenancy.TeamsOf(ctx, v.sess.UserID)
	if err != nil {
		return d.internalError(c, err)
	}
	if len(teams) == 0 {
		return d.errorPage(c, http.StatusOK, "No team yet", "You are not a member of any team. Ask a team's admin for an invitation.")
	}
	clusters, err := d.cfg.Tenancy.ClustersOf(ctx, teams[0].ID)
	if err != nil {
		return d.internalError(c, err)
	}
	if len(clusters) == 0 {
		return c.Redirect(http.StatusSeeOther, teamURL(teams[0].ID))
	}
	return c.Redirect(http.StatusSeeOther, clusterURL(clusters[0].ID))
}

// clusterPage loads the scope of a cluster page, answering the error itself (ok false).
func (d *Dashboard) clusterPage(c echo.Context) (*scope, bool, error) {
	s, err := d.clusterScope(c.Request().Context(), viewerOf(c), c.Param("cluster"))
	if err != nil {
		return nil, false, d.scopeError(c, err, "cluster "+c.Param("cluster"))
	}
	return s, true, nil
}

func (d *Dashboard) listPage(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	res, rerr := d.resource(cleanKey(c.Param("resource")))
	if rerr != nil {
		return d.notFound(c, "There is no resource "+c.Param("resource")+" in this cluster.")
	}
	q := c.QueryParams()
	q.Set("resource", resourceKey(res))
	lq := parseListQuery(q)
	region, err := renderListRegion(ctx, d, s, q)
	status := http.StatusOK
	if err != nil {
		if region, err = regionError(err); err != nil {
			return d.internalError(c, err)
		}
		status = http.StatusForbidden
	}
	sh := d.shell(s, res.GVK.Kind+"s", resourceKey(res))
	if res.Plural != "" {
		sh.Title = kindTitle(res)
	}
	canCreate, _, _ := d.can(ctx, s, "create", res, lq.Namespace, "")
	v := listPageView{Shell: sh, Kind: res.GVK.Kind, Key: resourceKey(res), Namespaced: res.Namespaced, Query: lq,
		IsPods: res.Plural == "pods" && res.GVK.Group == "", Params: lq.regionParams(s.cluster.ID), CanCreate: canCreate}
	v.Namespaces = d.namespaceNames(c, s)
	return d.render(c, status, listPage(v, region))
}

// namespaceNames are the cluster's namespaces when the user may list them (nil otherwise: the filter is a text
// box).
func (d *Dashboard) namespaceNames(c echo.Context, s *scope) []string {
	ctx := c.Request().Context()
	res, err := d.resource("namespaces")
	if err != nil {
		return nil
	}
	if ok, _, err := d.can(ctx, s, "list", res, "", ""); err != nil || !ok {
		return nil
	}
	col, err := d.collection(ctx, s, res)
	if err != nil {
		return nil
	}
	entries, _ := col.List("")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names
}

// kindTitle is a list page's title: the resource's plural as people write it ("Deployments", "EndpointSlices").
func kindTitle(res *resources.Resource) string {
	k, p := res.GVK.Kind, res.Plural
	lk := strings.ToLower(k)
	n := 0
	for n < len(lk) && n < len(p) && lk[n] == p[n] {
		n++
	}
	return k[:n] + p[n:]
}

func (d *Dashboard) overviewPage(c echo.Context) error {
	s, ok, err := d.clusterPage(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	q := url.Values{"cluster": {s.cluster.ID}}
	region, err := renderOverviewRegion(ctx, d, s, q)
	if err != nil {
		return d.internalError(c, err)
	}
	wq := url.Values{"cluster": {s.cluster.ID}, "type": {"Warning"}, "limit": {"10"}}
	warnings, err := renderEventsRegion(ctx, d, s, wq)
	if err != nil {
		if warnings, err = regionError(err); err != nil {
			return d.internalError(c, err)
		}
	}
	return d.render(c, http.StatusOK, overviewPage(d.shell(s, s.cluster.Name, "overview"), s.cluster, q.Encode(), region,
		wq.Encode(), warnings))
}

// detailPageView is an object's page: its live detail and events, and the actions the user may take.
type detailPageView struct {
	Shell        shell
	Ref          objectRef
	Kind         string
	Params       string
	EventsParams string
	Actions      []action
	Scale        *int32 // the replica count when the user may scale it
	Revisions    []int64
	Flash        string
	Error        string
}

// action is a button on an object's page; Confirm sends it through a confirmation page first.
type action struct {
	Name, Label string
	Confirm     bool
	Danger      bool
}

func (d *Dashboard) detailPage(c echo.Context) error {
	s, ref, res, ok, err := d.objectPage(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	q, _ := url.ParseQuery(ref.params())
	region, err := renderDetailRegion(ctx, d, s, q)
	status := http.StatusOK
	if err != nil {
		if region, err = regionError(err); err != nil {
			return d.internalError(c, err)
		}
		status = http.StatusNotFound
	}
	v := detailPageView{Shell: d.shell(s, res.GVK.Kind+" "+ref.Name, ref.Key), Ref: ref, Kind: res.GVK.Kind,
		Params: ref.params(), Flash: c.QueryParam("done"), Error: c.QueryParam("error")}
	eq := url.Values{"cluster": {s.cluster.ID}, "name": {ref.Name}, "kind": {res.GVK.Kind}}
	if ref.Namespace != "" {
		eq.Set("ns", ref.Namespace)
	}
	v.EventsParams = eq.Encode()
	events, err := renderEventsRegion(ctx, d, s, eq)
	if err != nil {
		if events, err = regionError(err); err != nil {
			return d.internalError(c, err)
		}
	}
	if status == http.StatusOK {
		d.detailActions(ctx, s, res, ref, &v)
	}
	return d.render(c, status, detailPage(v, region, events))
}

// objectPage loads the scope of an object's page and the object its URL names, answering the error itself
// (ok false): 404 for a cluster the user is not in, a resource the cluster does not serve or a bad namespace.
func (d *Dashboard) objectPage(c echo.Context) (s *scope, ref objectRef, res *resources.Resource, ok bool, err error) {
	if s, ok, err = d.clusterPage(c); !ok {
		return nil, objectRef{}, nil, false, err
	}
	if res, err = d.resource(cleanKey(c.Param("resource"))); err != nil {
		return nil, objectRef{}, nil, false, d.notFound(c, "There is no resource "+c.Param("resource")+" in this cluster.")
	}
	ref = objectRef{Cluster: s.cluster.ID, Key: resourceKey(res), Namespace: c.Param("namespace"), Name: c.Param("name")}
	if ref.Namespace == "-" || !res.Namespaced {
		ref.Namespace = ""
	}
	if res.Namespaced && (ref.Namespace == "" || !validNamespace(ref.Namespace)) {
		return nil, objectRef{}, nil, false, d.notFound(c, "That is not a namespace name.")
	}
	return s, ref, res, true, nil
}
