package store

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openTest opens a store on a fresh database; extra options adjust the Config.
func openTest(t testing.TB, opts ...func(*Config)) *Store {
	t.Helper()
	return openURL(t, pgtest.NewDatabase(t), opts...)
}

func openURL(t testing.TB, url string, opts ...func(*Config)) *Store {
	t.Helper()
	cfg := Config{URL: url, Retention: -1, PollInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func key(cluster, ns, name string) Key {
	return Key{Cluster: cluster, Resource: "pods", Namespace: ns, Name: name}
}

func mustCreate(t testing.TB, s *Store, k Key, v string) Object {
	t.Helper()
	o, err := s.Create(t.Context(), k, []byte(v))
	if err != nil {
		t.Fatalf("Create %s: %v", k, err)
	}
	return o
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// nextEvent waits for one event (failing the test after a generous deadline: a missing event is a bug).
func nextEvent(t testing.TB, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watcher closed: %v", w.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return Event{}
}

// nextChange is nextEvent skipping bookmarks.
func nextChange(t testing.TB, w *Watcher) Event {
	t.Helper()
	for {
		if ev := nextEvent(t, w); ev.Type != Bookmark {
			return ev
		}
	}
}
