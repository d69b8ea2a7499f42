package perf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// The watcher is a second process of the harness, so that watch latency crosses a process boundary and the
// memory of the process holding the watches can be read on its own. The parent sends a watcherSpec as the first
// line of its stdin and a watcherCmd once the writes are done; the watcher answers with watcherMsg lines.

// Watcher modes.
const (
	modeLatency = "latency" // one watch on resWatch; record each event's delivery time minus its write start
	modeHold    = "hold"    // Watches idle watches on resList, spread over namespaces; count only
)

// Watcher kinds: the Wheelhouse store (opened in the watcher process) or any etcd-API server.
const (
	kindStore = "store"
	kindEtcd  = "etcd"
)

type watcherSpec struct {
	Kind    string
	URL     string // PostgreSQL URL for kindStore, endpoint for kindEtcd
	Mode    string
	Watches int
}

type watcherCmd struct {
	// Expect is how many events to wait for before answering, for at most Timeout.
	Expect  int
	Timeout time.Duration
}

type watcherMsg struct {
	Ready  bool           `json:",omitempty"`
	Err    string         `json:",omitempty"`
	Result *watcherResult `json:",omitempty"`
}

type watcherResult struct {
	Received  int
	Latencies []time.Duration
	// RSS and HeapBytes are the watcher process's own, when it answered.
	RSS       int64
	HeapBytes int64
	Errors    []string
}

// WatcherMain is the watcher process: it reads its instructions from stdin and writes JSON lines to stdout.
// It returns the process exit code.
func WatcherMain(ctx context.Context, stdin io.Reader, stdout io.Writer) int {
	enc := json.NewEncoder(stdout)
	if err := watcherRun(ctx, stdin, enc); err != nil {
		_ = enc.Encode(watcherMsg{Err: err.Error()})
		return 1
	}
	return 0
}

func watcherRun(ctx context.Context, stdin io.Reader, enc *json.Encoder) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := bufio.NewScanner(stdin)
	var spec watcherSpec
	if err := readJSONLine(lines, &spec); err != nil {
		return fmt.Errorf("watcher: spec: %w", err)
	}
	rec := &recorder{latency: spec.Mode == modeLatency, changed: make(chan struct{}, 1)}
	closeFn, err := openWatches(ctx, spec, rec)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := enc.Encode(watcherMsg{Ready: true}); err != nil {
		return err
	}
	var cmd watcherCmd
	if err := readJSONLine(lines, &cmd); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // the parent is gone or done with us
		}
		return fmt.Errorf("watcher: command: %w", err)
	}
	res := rec.await(ctx, cmd)
	res.RSS, _ = rssBytes(os.Getpid())
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	res.HeapBytes = int64(ms.HeapInuse)
	return enc.Encode(watcherMsg{Result: res})
}

func readJSONLine(sc *bufio.Scanner, v any) error {
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	return json.Unmarshal(sc.Bytes(), v)
}

// recorder collects what the watches deliver.
type recorder struct {
	latency bool
	changed chan struct{} // signalled after every event batch

	mu        sync.Mutex // guards the fields below
	received  int
	latencies []time.Duration
	errs      []string
}

func (r *recorder) event(value []byte, at time.Time) {
	r.mu.Lock()
	r.received++
	if r.latency {
		if start, err := valueTime(value); err != nil {
			r.addErrLocked(err.Error())
		} else {
			r.latencies = append(r.latencies, at.Sub(start))
		}
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.addErrLocked(err.Error())
	r.mu.Unlock()
}

func (r *recorder) addErrLocked(msg string) {
	if len(r.errs) < 20 {
		r.errs = append(r.errs, msg)
	}
}

// await waits until cmd.Expect events arrived or cmd.Timeout passed, and returns what was recorded.
func (r *recorder) await(ctx context.Context, cmd watcherCmd) *watcherResult {
	timeout := time.NewTimer(cmd.Timeout)
	defer timeout.Stop()
	for !r.reached(cmd.Expect) {
		select {
		case <-r.changed:
		case <-timeout.C:
			return r.result()
		case <-ctx.Done():
			return r.result()
		}
	}
	return r.result()
}

func (r *recorder) reached(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received >= n
}

func (r *recorder) result() *watcherResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &watcherResult{Received: r.received, Latencies: r.latencies, Errors: r.errs}
}

// openWatches starts the spec's watches, feeding rec, and returns once they are all established.
func openWatches(ctx context.Context, spec watcherSpec, rec *recorder) (func(), error) {
	switch spec.Kind {
	case kindStore:
		return openStoreWatches(ctx, spec, rec)
	case kindEtcd:
		return openEtcdWatches(ctx, spec, rec)
	}
	return nil, fmt.Errorf("watcher: unknown kind %q", spec.Kind)
}

// watchScope is what watch i of a spec selects: the latency watch sees the whole watch resource, the held
// watches one namespace each of the list resource.
func watchScope(spec watcherSpec, i int) (resource, namespace string) {
	if spec.Mode == modeLatency {
		return resWatch, ""
	}
	return resList, listNamespace(i)
}

func openStoreWatches(ctx context.Context, spec watcherSpec, rec *recorder) (func(), error) {
	s, err := openStore(ctx, spec.URL, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return nil, err
	}
	for i := range spec.Watches {
		res, ns := watchScope(spec, i)
		w, err := s.Watch(ctx, store.WatchOptions{Cluster: cluster, Resource: res, Namespace: ns})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("watcher: watch %d: %w", i, err)
		}
		go func() {
			for ev := range w.Events() {
				if ev.Type != store.Bookmark {
					rec.event(ev.Object.Value, time.Now())
				}
			}
			if err := w.Err(); err != nil && ctx.Err() == nil {
				rec.fail(fmt.Errorf("watch %d ended: %w", i, err))
			}
		}()
	}
	return s.Close, nil
}

func openEtcdWatches(ctx context.Context, spec watcherSpec, rec *recorder) (func(), error) {
	cli, err := dialEtcd(ctx, spec.URL)
	if err != nil {
		return nil, err
	}
	for i := range spec.Watches {
		res, ns := watchScope(spec, i)
		prefix := "/registry/" + res + "/"
		if ns != "" {
			prefix += ns + "/"
		}
		wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		if first, ok := <-wch; !ok || !first.Created {
			cli.Close()
			return nil, fmt.Errorf("watcher: watch %d on %s not created: %v", i, prefix, first.Err())
		}
		go drainEtcd(ctx, i, wch, rec)
	}
	return func() { cli.Close() }, nil
}

func drainEtcd(ctx context.Context, i int, wch clientv3.WatchChan, rec *recorder) {
	for resp := range wch {
		at := time.Now()
		if err := resp.Err(); err != nil {
			rec.fail(fmt.Errorf("watch %d: %w", i, err))
			continue
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				rec.event(ev.Kv.Value, at)
			}
		}
	}
	if ctx.Err() == nil {
		rec.fail(fmt.Errorf("watch %d: channel closed", i))
	}
}
