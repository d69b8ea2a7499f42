package kubeapi

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// An informer whose watch breaks after its resourceVersion was compacted gets 410, relists and converges.
func TestInformerRelistsAfterCompaction(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		// No store bookmarks: the informer's resourceVersion stays at its last event, so it falls behind.
		env := newTestEnvStore(t, store.Config{PollInterval: 50 * time.Millisecond, ProgressInterval: time.Hour}, path)
		c1, c2 := env.client(t, "c1"), env.client(t, "c2")
		ctx, cancel := context.WithCancel(t.Context())
		factory := informers.NewSharedInformerFactoryWithOptions(c1, 0, informers.WithNamespace("default"))
		inf := factory.Core().V1().ConfigMaps().Informer()
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		defer cancel()
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		for i := range 5 { // other clusters' writes move the global revision past the informer's
			if _, err := c2.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("c2-%d", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		rev, err := env.store.CurrentRevision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.store.Compact(ctx, rev); err != nil {
			t.Fatal(err)
		}
		readsBefore := env.reads.Load()
		env.mu.Lock()
		watchesBefore := len(env.watchRVs)
		env.mu.Unlock()
		env.srv.CloseClientConnections() // the watch breaks; the reflector resumes from a compacted revision
		pollUntil(t, func() bool {       // connections may still be closing: retry the create
			_, err := c1.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "after-compaction"}}, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err)
		})
		pollUntil(t, func() bool {
			_, ok, _ := inf.GetStore().GetByKey("default/after-compaction")
			return ok
		})
		env.mu.Lock()
		resumed := env.watchRVs[watchesBefore:]
		env.mu.Unlock()
		stale := 0
		for _, rv := range resumed {
			if n, err := strconv.ParseInt(rv, 10, 64); err == nil && n > 0 && n < rev {
				stale++ // answered 410 (TestWatchCompacted covers the answer itself)
			}
		}
		if stale == 0 || env.reads.Load() == readsBefore {
			t.Errorf("watches resumed below the compaction revision %d: %d (of %v); full reads after: %d; want both",
				rev, stale, resumed, env.reads.Load()-readsBefore)
		}
	})
}

// WatchList: sendInitialEvents streams the state as ADDED events, then a bookmark marked
// k8s.io/initial-events-end, then changes.
func TestWatchList(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx := t.Context()
		cms := cs.CoreV1().ConfigMaps("default")
		for _, n := range []string{"a", "b"} {
			if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		yes := true
		w, err := cms.Watch(ctx, metav1.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
			ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		added := map[string]bool{}
		for {
			ev := next(t, w)
			if ev.Type == watch.Bookmark {
				if ev.Object.(*corev1.ConfigMap).Annotations[initialEventsEnd] != "true" {
					t.Fatalf("bookmark before the initial-events-end one: %+v", ev.Object)
				}
				break
			}
			if ev.Type != watch.Added {
				t.Fatalf("initial event %s", ev.Type)
			}
			added[ev.Object.(*corev1.ConfigMap).Name] = true
		}
		if !added["a"] || !added["b"] {
			t.Fatalf("initial events = %v, want a and b", added)
		}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			ev := next(t, w)
			if ev.Type == watch.Bookmark {
				continue
			}
			if ev.Type != watch.Added || ev.Object.(*corev1.ConfigMap).Name != "c" {
				t.Fatalf("after the initial events: %s %v", ev.Type, ev.Object)
			}
			break
		}
	})
}

// 100 watchers from one revision see the same events in the same order (upstream's watch conformance case).
func TestManyWatchersSameOrder(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx := t.Context()
		cms := cs.CoreV1().ConfigMaps("default")
		start, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const watchers, writes = 100, 30
		ws := make([]watch.Interface, watchers)
		for i := range ws {
			if ws[i], err = cms.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion}); err != nil {
				t.Fatal(err)
			}
			defer ws[i].Stop()
		}
		var wg sync.WaitGroup
		for i := range writes {
			wg.Go(func() {
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w%d", i)}},
					metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		var want []string
		for i, w := range ws {
			var got []string
			for len(got) < writes {
				ev := next(t, w)
				m := ev.Object.(*corev1.ConfigMap)
				got = append(got, m.ResourceVersion+"/"+m.Name)
			}
			if i == 0 {
				want = got
				continue
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("watcher %d saw %v, watcher 0 saw %v", i, got, want)
			}
		}
	})
}

// pollUntil polls cond for up to 20 s.
func pollUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 20s")
		}
		<-tick.C
	}
}

// TestTypedSubresourcesOverProtobuf: client-go's typed clients send protobuf bodies to subresources too
// (UpdateScale, Bind); the API decodes them in the request's format.
func TestTypedSubresourcesOverProtobuf(t *testing.T) {
	env := newTestEnv(t)
	cs := env.client(t, "c1")
	ctx := t.Context()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}}}
	if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc, err := cs.AppsV1().Deployments("default").GetScale(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sc.Spec.Replicas = 4
	if _, err := cs.AppsV1().Deployments("default").UpdateScale(ctx, "web", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("UpdateScale: %v", err)
	}
	if got, _ := cs.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{}); *got.Spec.Replicas != 4 {
		t.Fatalf("replicas %d after UpdateScale, want 4", *got.Spec.Replicas)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if got, _ := cs.CoreV1().Pods("default").Get(ctx, "p", metav1.GetOptions{}); got.Spec.NodeName != "node-1" {
		t.Fatalf("nodeName %q after Bind", got.Spec.NodeName)
	}
}
