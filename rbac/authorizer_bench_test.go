package rbac

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// benchPolicy is the scale: 1,000 teams × 10 clusters, each cluster with the built-in roles and
// bindings plus 20 bindings of its users (namespaced and cluster-wide, to built-in roles).
func benchPolicy(clusters int) *memSource {
	src := newMemSource()
	d := BootstrapDefaults()
	roles := []string{"view", "edit", "admin"}
	for c := range clusters {
		cluster := fmt.Sprint("c", c)
		src.change(cluster, func(o *Objects) {
			for i := range d.ClusterRoles {
				o.ClusterRoles = append(o.ClusterRoles, &d.ClusterRoles[i])
			}
			for i := range d.ClusterRoleBindings {
				o.ClusterRoleBindings = append(o.ClusterRoleBindings, &d.ClusterRoleBindings[i])
			}
			for i := range d.Roles {
				o.Roles = append(o.Roles, &d.Roles[i])
			}
			for i := range d.RoleBindings {
				o.RoleBindings = append(o.RoleBindings, &d.RoleBindings[i])
			}
			for b := range 20 {
				u := user(fmt.Sprint("user", b%10))
				if b%4 == 0 {
					o.ClusterRoleBindings = append(o.ClusterRoleBindings, crb(fmt.Sprint("u", b), roles[b%3], u))
					continue
				}
				o.RoleBindings = append(o.RoleBindings, rb(fmt.Sprint("ns", b%5), fmt.Sprint("u", b), "ClusterRole", roles[b%3], u))
			}
		})
	}
	return src
}

// benchRequests are typical API requests of the clusters' users and of team members (through their group).
func benchRequests(clusters int) []Request {
	r := rand.New(rand.NewPCG(1, 2))
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	res := []struct{ group, resource, sub string }{{"", "pods", ""}, {"", "pods", "log"}, {"apps", "deployments", ""},
		{"apps", "deployments", "scale"}, {"", "secrets", ""}, {"", "configmaps", ""}, {"rbac.authorization.k8s.io", "rolebindings", ""},
		{"batch", "jobs", ""}, {"", "services", ""}, {"", "nodes", ""}}
	reqs := make([]Request, 4096)
	for i := range reqs {
		rr := res[r.IntN(len(res))]
		req := Request{Cluster: fmt.Sprint("c", r.IntN(clusters)), User: fmt.Sprint("user", r.IntN(12)),
			Groups: []string{"system:authenticated"}, Verb: verbs[r.IntN(len(verbs))], Group: rr.group, Resource: rr.resource,
			Subresource: rr.sub, Namespace: fmt.Sprint("ns", r.IntN(6)), Name: "x"}
		if r.IntN(3) == 0 {
			req.Groups = append(req.Groups, "wheelhouse:team:"+[]string{"owner", "admin", "member", "viewer"}[r.IntN(4)])
		}
		reqs[i] = req
	}
	return reqs
}

// BenchmarkAuthorize measures decisions at the scale (10,000 clusters, policies built beforehand) and
// reports p50 / p99 per decision besides the mean; "nomemo" evaluates every decision in Casbin (the cost of a
// question no role has been asked before).
func BenchmarkAuthorize(b *testing.B) {
	b.Run("memo", func(b *testing.B) { benchAuthorize(b) })
	b.Run("nomemo", func(b *testing.B) {
		memoEnabled = false
		defer func() { memoEnabled = true }()
		benchAuthorize(b)
	})
}

func benchAuthorize(b *testing.B) {
	const clusters = 10000
	src := benchPolicy(clusters)
	a := newTestAuthorizer(b, src)
	ctx := context.Background()
	start := time.Now()
	for c := range clusters {
		if _, err := a.snapshot(ctx, fmt.Sprint("c", c)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/clusters, "µs/cluster-build")
	reqs := benchRequests(clusters)
	lat := make([]time.Duration, 0, b.N)
	allowed := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		d, err := a.Authorize(ctx, reqs[i%len(reqs)])
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	b.ReportMetric(float64(allowed)/float64(len(lat)), "allowed-ratio")
}

// BenchmarkSnapshotBuild is the cost of rebuilding one cluster's policy after an RBAC change.
func BenchmarkSnapshotBuild(b *testing.B) {
	src := benchPolicy(1)
	objs, v, _ := src.Objects(context.Background(), "c0")
	for b.Loop() {
		if _, err := buildSnapshot(objs, v); err != nil {
			b.Fatal(err)
		}
	}
}
