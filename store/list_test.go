package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func names(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return out
}

func TestListOrderNamespacesAndPaging(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	var want []string
	for _, ns := range []string{"b", "a"} {
		for i := range 5 {
			mustCreate(t, s, key("c1", ns, fmt.Sprintf("p%d", i)), "x")
			want = append(want, fmt.Sprintf("%s/p%d", ns, i))
		}
	}
	mustCreate(t, s, key("c2", "a", "other-cluster"), "x")
	mustCreate(t, s, Key{Cluster: "c1", Resource: "services", Namespace: "a", Name: "svc"}, "x")
	sort.Strings(want)

	all, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, names(all.Items)); diff != "" {
		t.Fatalf("List (-want +got):\n%s", diff)
	}
	if all.Continue != "" {
		t.Fatalf("unlimited list has a continue token")
	}
	cur, _ := s.CurrentRevision(ctx)
	if all.Revision != cur {
		t.Fatalf("list revision %d, current %d", all.Revision, cur)
	}

	nsA, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Namespace: "a"})
	if err != nil || len(nsA.Items) != 5 || nsA.Items[0].Namespace != "a" {
		t.Fatalf("namespace list = %v, %v", names(nsA.Items), err)
	}

	for _, limit := range []int{1, 3, 5, 10, 11} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			var got []string
			opts := ListOptions{Cluster: "c1", Resource: "pods", Limit: limit}
			pages := 0
			for {
				page, err := s.List(ctx, opts)
				if err != nil {
					t.Fatal(err)
				}
				if page.Revision != all.Revision {
					t.Fatalf("page revision %d, first page %d", page.Revision, all.Revision)
				}
				got = append(got, names(page.Items)...)
				pages++
				if page.Continue == "" {
					break
				}
				opts.Continue = page.Continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("pages (-want +got):\n%s", diff)
			}
			if wantPages := (len(want) + limit - 1) / limit; pages != max(wantPages, 1) {
				t.Fatalf("%d pages, want %d", pages, wantPages)
			}
		})
	}
}

// Every page of a list is read at the first page's revision, whatever is written meanwhile.
func TestListPaginationIsConsistentUnderConcurrentWrites(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	const n = 60
	for i := range n {
		mustCreate(t, s, key("c1", "ns", fmt.Sprintf("obj-%03d", i)), "v0")
	}
	first, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	snapshot, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods"})
	if err != nil || snapshot.Revision != first.Revision {
		t.Fatalf("snapshot at %d, first page at %d, %v", snapshot.Revision, first.Revision, err)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // churn: update, delete and create keys on both sides of the cursor
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := key("c1", "ns", fmt.Sprintf("obj-%03d", i%n))
			switch i % 3 {
			case 0:
				s.Update(ctx, k, []byte(fmt.Sprintf("v%d", i)), 0)
			case 1:
				s.Delete(ctx, k, 0)
			case 2:
				s.Create(ctx, key("c1", "ns", fmt.Sprintf("new-%03d", i)), []byte("new"))
			}
		}
	}()
	got := append([]Object(nil), first.Items...)
	opts := ListOptions{Cluster: "c1", Resource: "pods", Limit: 7, Continue: first.Continue}
	for opts.Continue != "" {
		page, err := s.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if page.Revision != first.Revision {
			t.Fatalf("page at revision %d, want %d", page.Revision, first.Revision)
		}
		got = append(got, page.Items...)
		opts.Continue = page.Continue
	}
	close(stop)
	wg.Wait()
	if diff := cmp.Diff(snapshot.Items, got); diff != "" {
		t.Fatalf("paged list differs from the snapshot at its revision (-snapshot +paged):\n%s", diff)
	}

	// An explicit revision reads the same snapshot again.
	again, err := s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Revision: first.Revision})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot.Items, again.Items); diff != "" {
		t.Fatalf("list at revision differs (-snapshot +again):\n%s", diff)
	}
	cur, _ := s.CurrentRevision(ctx)
	_, err = s.List(ctx, ListOptions{Cluster: "c1", Resource: "pods", Revision: cur + 100})
	wantErr(t, err, ErrFutureRevision)
}

func TestListBadContinueTokens(t *testing.T) {
	s := openTest(t)
	for name, tok := range map[string]string{
		"not base64": "%%%",
		"not json":   base64.RawURLEncoding.EncodeToString([]byte("nope")),
		"wrong ver":  base64.RawURLEncoding.EncodeToString([]byte(`{"v":9,"rv":1,"n":"a"}`)),
		"zero rev":   base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":0,"n":"a"}`)),
		"no name":    base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":5}`)),
		"negative":   base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":-3,"n":"a"}`)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.List(t.Context(), ListOptions{Cluster: "c", Resource: "pods", Limit: 1, Continue: tok})
			wantErr(t, err, ErrBadContinue)
		})
	}
	// A well-formed token from the future is not a bad token but a future revision.
	tok := encodeContinue(continueToken{Revision: 1 << 40, Name: "a"})
	_, err := s.List(t.Context(), ListOptions{Cluster: "c", Resource: "pods", Limit: 1, Continue: tok})
	wantErr(t, err, ErrFutureRevision)
}

func FuzzDecodeContinue(f *testing.F) {
	f.Add(encodeContinue(continueToken{Revision: 5, Namespace: "ns", Name: "a"}))
	f.Add("")
	f.Add("e30")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":9223372036854775807,"n":"\u0000"}`)))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := decodeContinue(s)
		if err != nil {
			return
		}
		if tok.Revision <= 0 || tok.Name == "" || tok.Version != continueVersion {
			t.Fatalf("accepted invalid token %+v", tok)
		}
		back, err := decodeContinue(encodeContinue(tok))
		if err != nil || back != tok {
			t.Fatalf("round trip: %+v → %+v, %v", tok, back, err)
		}
	})
}

// Whatever the token, List answers with a page or a clear error; never a panic or an internal error.
func FuzzListContinue(f *testing.F) {
	s := openTest(f)
	for i := range 3 {
		mustCreate(f, s, key("c", "ns", fmt.Sprintf("p%d", i)), "x")
	}
	page, err := s.List(f.Context(), ListOptions{Cluster: "c", Resource: "pods", Limit: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(page.Continue)
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":1,"ns":"\u0000","n":"a"}`)))
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"rv":1,"n":"\udfff"}`)))
	f.Add("x")
	f.Fuzz(func(t *testing.T, tok string) {
		_, err := s.List(t.Context(), ListOptions{Cluster: "c", Resource: "pods", Limit: 2, Continue: tok})
		if err != nil && !errors.Is(err, ErrBadContinue) && !errors.Is(err, ErrFutureRevision) && !errors.Is(err, ErrCompacted) {
			t.Fatalf("List with token %q: %v", tok, err)
		}
	})
}

func TestScanResourceAcrossClusters(t *testing.T) {
	s := openTest(t)
	ctx := t.Context()
	for _, c := range []string{"c1", "c2", "c3"} {
		mustCreate(t, s, key(c, "ns", "a"), "x")
	}
	mustCreate(t, s, Key{Cluster: "c1", Resource: "services", Namespace: "ns", Name: "other-kind"}, "x")
	seen := map[string]bool{}
	rev, err := s.ScanResource(ctx, "pods", func(o Object) error {
		seen[o.Cluster+"/"+o.Namespace+"/"+o.Name] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cur, _ := s.CurrentRevision(ctx); rev != cur || len(seen) != 3 || !seen["c2/ns/a"] {
		t.Fatalf("scan at %d (current %d): %v", rev, cur, seen)
	}
	_, err = s.ScanResource(ctx, "", func(Object) error { return nil })
	wantErr(t, err, ErrInvalid)
}
