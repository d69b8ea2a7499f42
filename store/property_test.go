package store

import (
	"errors"
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// TestStoreMatchesModel drives random operation sequences against the store and a map model: every result,
// error, Get and List must agree with the model; revisions strictly increase; and a watch replay from the start
// reproduces exactly the successful writes, in order.
func TestStoreMatchesModel(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	mustCreate(t, s, key("other", "ns", "first"), "x") // so every run starts above revision 0 ("from now")
	cluster := 0
	rapid.Check(t, func(rt *rapid.T) {
		cluster++
		c := fmt.Sprintf("prop-%d", cluster) // a fresh cluster per run: runs stay independent
		type entry struct {
			value    string
			rev, crt int64
		}
		model := map[Key]entry{}
		start, err := s.CurrentRevision(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		var writes []Event
		lastRev := start
		keyGen := rapid.Custom(func(t *rapid.T) Key {
			return Key{Cluster: c, Resource: "pods", Namespace: rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, "ns"),
				Name: rapid.SampledFrom([]string{"x", "y", "z"}).Draw(t, "name")}
		})
		checkRev := func(o Object) {
			if o.Revision <= lastRev {
				rt.Fatalf("revision %d not above %d", o.Revision, lastRev)
			}
			lastRev = o.Revision
		}
		rt.Repeat(map[string]func(*rapid.T){
			"create": func(t *rapid.T) {
				k, v := keyGen.Draw(t, "key"), rapid.StringMatching(`[a-z]{0,8}`).Draw(t, "value")
				o, err := s.Create(ctx, k, []byte(v))
				if _, exists := model[k]; exists {
					if !errors.Is(err, ErrExists) {
						t.Fatalf("create existing %s: %v", k, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("create %s: %v", k, err)
				}
				checkRev(o)
				model[k] = entry{v, o.Revision, o.Revision}
				writes = append(writes, Event{Type: Added, Object: o})
			},
			"update": func(t *rapid.T) {
				k, v := keyGen.Draw(t, "key"), rapid.StringMatching(`[a-z]{0,8}`).Draw(t, "value")
				e, exists := model[k]
				expect := int64(0)
				stale := rapid.Bool().Draw(t, "stale")
				if exists && !stale {
					expect = e.rev
				} else if exists {
					expect = e.rev - 1
				}
				o, err := s.Update(ctx, k, []byte(v), expect)
				switch {
				case !exists:
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("update missing %s: %v", k, err)
					}
				case stale:
					if !errors.Is(err, ErrConflict) {
						t.Fatalf("stale update %s: %v", k, err)
					}
				default:
					if err != nil {
						t.Fatalf("update %s: %v", k, err)
					}
					checkRev(o)
					if o.CreateRevision != e.crt {
						t.Fatalf("create revision changed %d → %d", e.crt, o.CreateRevision)
					}
					model[k] = entry{v, o.Revision, e.crt}
					writes = append(writes, Event{Type: Modified, Object: o, PrevRevision: e.rev})
				}
			},
			"delete": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				e, exists := model[k]
				o, err := s.Delete(ctx, k, 0)
				if !exists {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("delete missing %s: %v", k, err)
					}
					return
				}
				if err != nil || string(o.Value) != e.value {
					t.Fatalf("delete %s = %q, %v; want last value %q", k, o.Value, err, e.value)
				}
				checkRev(o)
				delete(model, k)
				writes = append(writes, Event{Type: Deleted, Object: o, PrevRevision: e.rev})
			},
			"get": func(t *rapid.T) {
				k := keyGen.Draw(t, "key")
				o, err := s.Get(ctx, k)
				e, exists := model[k]
				if !exists {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("get missing %s: %v", k, err)
					}
					return
				}
				if err != nil || string(o.Value) != e.value || o.Revision != e.rev || o.CreateRevision != e.crt {
					t.Fatalf("get %s = %+v, %v; model %+v", k, o, err, e)
				}
			},
			"list": func(t *rapid.T) {
				limit := rapid.IntRange(0, 4).Draw(t, "limit")
				var got []string
				opts := ListOptions{Cluster: c, Resource: "pods", Limit: limit}
				for {
					res, err := s.List(ctx, opts)
					if err != nil {
						t.Fatalf("list: %v", err)
					}
					for _, o := range res.Items {
						got = append(got, fmt.Sprintf("%s/%s=%s@%d", o.Namespace, o.Name, o.Value, o.Revision))
					}
					if opts.Continue = res.Continue; opts.Continue == "" {
						break
					}
				}
				var want []string
				for k, e := range model {
					want = append(want, fmt.Sprintf("%s/%s=%s@%d", k.Namespace, k.Name, e.value, e.rev))
				}
				sort.Strings(want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("list = %v, model %v", got, want)
				}
			},
		})
		if len(writes) == 0 {
			return
		}
		w, err := s.Watch(ctx, WatchOptions{Cluster: c, Revision: start})
		if err != nil {
			rt.Fatal(err)
		}
		defer w.Stop()
		for _, want := range writes {
			got := nextChange(t, w)
			if got.Type != want.Type || got.Revision() != want.Revision() || got.Object.Key != want.Object.Key ||
				string(got.Object.Value) != string(want.Object.Value) || got.PrevRevision != want.PrevRevision {
				rt.Fatalf("replay: got %v %s@%d %q prev %d, want %v %s@%d %q prev %d", got.Type, got.Object.Key, got.Revision(),
					got.Object.Value, got.PrevRevision, want.Type, want.Object.Key, want.Revision(), want.Object.Value, want.PrevRevision)
			}
		}
	})
}
