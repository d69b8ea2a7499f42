package web

import (
	"net/url"

	"github.com/wheelhouse-dev/wheelhouse/static"
	"github.com/wheelhouse-dev/wheelhouse/tenancy"
)

// shell is the frame around every signed-in page: who is signed in, the team and cluster switchers, the
// navigation.
type shell struct {
	Title     string
	Static    *static.Files
	Email     string
	CSRF      string
	Teams     []tenancy.TeamMembership
	TeamID    string
	Role      string
	Clusters  []tenancy.Cluster
	ClusterID string
	Nav       string // the active navigation entry's key
}

func (d *Dashboard) shell(s *scope, title, nav string) shell {
	return shell{Title: title, Static: d.static, Email: s.v.sess.Email, CSRF: s.v.sess.CSRF, Teams: s.teams,
		TeamID: s.team.ID, Role: s.team.Role, Clusters: s.clusters, ClusterID: s.cluster.ID, Nav: nav}
}

// navEntry is one link of the side navigation.
type navEntry struct{ Key, Label string }

type navSection struct {
	Title   string
	Entries []navEntry
}

// clusterNav is the side navigation of cluster pages; keys are resource keys, or a page's own name.
var clusterNav = []navSection{
	{"Cluster", []navEntry{{"overview", "Overview"}, {"nodes", "Nodes"}, {"join", "Add nodes"}, {"namespaces", "Namespaces"},
		{"events", "Events"}}},
	{"Workloads", []navEntry{{"pods", "Pods"}, {"deployments.apps", "Deployments"}, {"replicasets.apps", "ReplicaSets"},
		{"statefulsets.apps", "StatefulSets"}, {"daemonsets.apps", "DaemonSets"}, {"jobs.batch", "Jobs"},
		{"cronjobs.batch", "CronJobs"}}},
	{"Network", []navEntry{{"services", "Services"}, {"endpointslices.discovery.k8s.io", "EndpointSlices"}}},
	{"Config", []navEntry{{"configmaps", "ConfigMaps"}, {"secrets", "Secrets"}, {"serviceaccounts", "ServiceAccounts"}}},
	{"Access control", []navEntry{{"roles.rbac.authorization.k8s.io", "Roles"},
		{"rolebindings.rbac.authorization.k8s.io", "RoleBindings"},
		{"clusterroles.rbac.authorization.k8s.io", "ClusterRoles"},
		{"clusterrolebindings.rbac.authorization.k8s.io", "ClusterRoleBindings"}}},
	{"Tools", []navEntry{{"apply", "Create from YAML"}}},
}

func (sh shell) clusterLink(key string) string {
	base := Prefix + "/c/" + url.PathEscape(sh.ClusterID)
	switch key {
	case "overview":
		return base
	case "join", "apply":
		return base + "/" + key
	}
	return base + "/r/" + url.PathEscape(key)
}

func (sh shell) teamLink(page string) string {
	base := Prefix + "/t/" + url.PathEscape(sh.TeamID)
	if page == "" {
		return base
	}
	return base + "/" + page
}

func teamURL(id string) string    { return Prefix + "/t/" + url.PathEscape(id) }
func clusterURL(id string) string { return Prefix + "/c/" + url.PathEscape(id) }
