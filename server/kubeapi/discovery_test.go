package kubeapi

import (
	"slices"
	"testing"

	"k8s.io/client-go/discovery"
)

// Discovery through client-go (aggregated, as kubectl uses it) lists every registered kind with its short names,
// categories and subresources.
func TestDiscoveryListsEveryKind(t *testing.T) {
	env := newTestEnv(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.config("c1", adminToken))
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	short, all := map[string]string{}, map[string]bool{}
	names := map[string]bool{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			names[l.GroupVersion+"/"+r.Name] = true
			for _, s := range r.ShortNames {
				short[s] = r.Name
			}
			if slices.Contains(r.Categories, "all") {
				all[r.Name] = true
			}
		}
	}
	for _, r := range env.api.cfg.Registry.All() {
		if !names[r.GVK.GroupVersion().String()+"/"+r.Plural] {
			t.Errorf("discovery lacks %s %s", r.GVK.GroupVersion(), r.Plural)
		}
	}
	for s, want := range map[string]string{"po": "pods", "deploy": "deployments", "svc": "services", "ns": "namespaces",
		"cm": "configmaps", "sa": "serviceaccounts", "no": "nodes", "rs": "replicasets", "ds": "daemonsets",
		"sts": "statefulsets", "cj": "cronjobs", "hpa": "horizontalpodautoscalers", "pdb": "poddisruptionbudgets",
		"pc": "priorityclasses", "quota": "resourcequotas", "limits": "limitranges", "ep": "endpoints"} {
		if short[s] != want {
			t.Errorf("short name %s = %q, want %s", s, short[s], want)
		}
	}
	for _, r := range []string{"pods", "services", "deployments", "replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs"} {
		if !all[r] {
			t.Errorf("%s is not in category all (kubectl get all)", r)
		}
	}
	_, res, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	subs := map[string]bool{}
	for _, l := range res {
		for _, r := range l.APIResources {
			subs[r.Name] = true
		}
	}
	for _, s := range []string{"pods/status", "pods/binding", "pods/resize", "deployments/scale", "deployments/status", "replicasets/scale",
		"statefulsets/scale", "nodes/status", "services/status"} {
		if !subs[s] {
			t.Errorf("subresource %s not discovered", s)
		}
	}
}
