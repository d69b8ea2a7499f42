package store

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCreateGetUpdateDelete(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	k := key("c1", "default", "web")

	created := mustCreate(t, s, k, `{"v":1}`)
	if created.Revision <= 0 || created.CreateRevision != created.Revision {
		t.Fatalf("created = %+v", created)
	}
	got, err := s.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Fatalf("Get differs from Create (-create +get):\n%s", diff)
	}

	_, err = s.Create(ctx, k, []byte(`{"v":2}`))
	wantErr(t, err, ErrExists)

	_, err = s.Update(ctx, k, []byte(`{"v":2}`), created.Revision+1000)
	wantErr(t, err, ErrConflict)
	updated, err := s.Update(ctx, k, []byte(`{"v":2}`), created.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Revision <= created.Revision || updated.CreateRevision != created.Revision || string(updated.Value) != `{"v":2}` {
		t.Fatalf("updated = %+v", updated)
	}
	uncond, err := s.Update(ctx, k, []byte(`{"v":3}`), 0)
	if err != nil || uncond.Revision <= updated.Revision {
		t.Fatalf("unconditional update = %+v, %v", uncond, err)
	}

	_, err = s.Delete(ctx, k, updated.Revision)
	wantErr(t, err, ErrConflict)
	deleted, err := s.Delete(ctx, k, uncond.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if deleted.Revision <= uncond.Revision || string(deleted.Value) != `{"v":3}` || deleted.CreateRevision != created.Revision {
		t.Fatalf("deleted = %+v", deleted)
	}
	_, err = s.Get(ctx, k)
	wantErr(t, err, ErrNotFound)
	_, err = s.Update(ctx, k, []byte(`{}`), 0)
	wantErr(t, err, ErrNotFound)
	_, err = s.Delete(ctx, k, 0)
	wantErr(t, err, ErrNotFound)

	again := mustCreate(t, s, k, `{"v":4}`)
	if again.CreateRevision <= deleted.Revision {
		t.Fatalf("re-created key kept its old create revision: %+v", again)
	}
	cur, err := s.CurrentRevision(ctx)
	if err != nil || cur < again.Revision {
		t.Fatalf("CurrentRevision = %d, %v; want >= %d", cur, err, again.Revision)
	}
}

func TestInvalidKeys(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	for name, k := range map[string]Key{
		"no cluster":  {Resource: "pods", Name: "a"},
		"no resource": {Cluster: "c", Name: "a"},
		"no name":     {Cluster: "c", Resource: "pods"},
		"NUL":         {Cluster: "c", Resource: "pods", Name: "a\x00b"},
		"bad UTF-8":   {Cluster: "c", Resource: "pods", Name: "\xff"},
		"too long":    {Cluster: "c", Resource: "pods", Name: strings.Repeat("a", 2000)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.Create(ctx, k, []byte("x"))
			wantErr(t, err, ErrInvalid)
			_, err = s.Get(ctx, k)
			wantErr(t, err, ErrInvalid)
			_, err = s.Update(ctx, k, []byte("x"), 0)
			wantErr(t, err, ErrInvalid)
			_, err = s.Delete(ctx, k, 0)
			wantErr(t, err, ErrInvalid)
		})
	}
	_, err := s.Update(ctx, key("c", "", "a"), nil, -1)
	wantErr(t, err, ErrInvalid)
	_, err = s.List(ctx, ListOptions{Resource: "pods"})
	wantErr(t, err, ErrInvalid)
	_, err = s.Watch(ctx, WatchOptions{Revision: -5})
	wantErr(t, err, ErrInvalid)
}

// Several operations on one key queued together land in one batch and must behave as if sent one by one.
func TestBatchedOpsOnOneKeyAreSequential(t *testing.T) {
	s := openTest(t, func(c *Config) { c.Writers = 1 })
	ctx := t.Context()
	k := key("c1", "ns", "x")
	type outcome struct {
		obj Object
		err error
	}
	const n = 40
	results := make(chan outcome, n)
	for i := range n {
		go func() {
			var o Object
			var err error
			if i%2 == 0 {
				o, err = s.Create(ctx, k, []byte("v"))
			} else {
				o, err = s.Delete(ctx, k, 0)
			}
			results <- outcome{o, err}
		}()
	}
	var creates, deletes, revs = 0, 0, map[int64]bool{}
	for range n {
		r := <-results
		switch {
		case r.err == nil && r.obj.Revision == r.obj.CreateRevision:
			creates++
		case r.err == nil:
			deletes++
		case !strings.Contains(r.err.Error(), "exists") && !strings.Contains(r.err.Error(), "not found"):
			t.Fatalf("unexpected error %v", r.err)
		}
		if r.err == nil {
			if revs[r.obj.Revision] {
				t.Fatalf("revision %d handed out twice", r.obj.Revision)
			}
			revs[r.obj.Revision] = true
		}
	}
	_, err := s.Get(ctx, k)
	exists := err == nil
	if want := deletes; exists {
		want++
		if creates != want {
			t.Fatalf("%d creates, %d deletes, key exists", creates, deletes)
		}
	} else if creates != deletes {
		t.Fatalf("%d creates, %d deletes, key absent", creates, deletes)
	}
}

func TestDeleteCluster(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	for i := range 12 {
		mustCreate(t, s, key("gone", "ns", fmt.Sprint("o", i)), "x")
	}
	kept := mustCreate(t, s, key("kept", "ns", "a"), "x")
	if _, err := s.Update(ctx, key("gone", "ns", "o1"), []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCluster(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCluster(ctx, "gone"); err != nil {
		t.Fatalf("second DeleteCluster: %v", err)
	}
	res, err := s.List(ctx, ListOptions{Cluster: "gone", Resource: "pods"})
	if err != nil || len(res.Items) != 0 {
		t.Fatalf("objects left in a deleted cluster: %v %v", res.Items, err)
	}
	var history int
	if err := s.pool.QueryRow(ctx, "SELECT count(*) FROM history WHERE cluster = 'gone'").Scan(&history); err != nil || history != 0 {
		t.Fatalf("%d history rows left (%v)", history, err)
	}
	if got, err := s.Get(ctx, kept.Key); err != nil || got.Revision != kept.Revision {
		t.Fatalf("another cluster's object: %+v %v", got, err)
	}
	wantErr(t, s.DeleteCluster(ctx, ""), ErrInvalid)
}
