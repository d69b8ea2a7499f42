package perf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// target is one system under test, driven through the operations Kubernetes' storage layer issues.
type target interface {
	// Create stores a new key and returns its revision; errExists if it is there already.
	Create(ctx context.Context, k objKey, value []byte) (int64, error)
	// Update replaces k's value if its revision is rev (compare-and-swap) and returns the new revision;
	// errConflict otherwise.
	Update(ctx context.Context, k objKey, value []byte, rev int64) (int64, error)
	// List reads every object of resource in one request and returns how many there were.
	List(ctx context.Context, resource string) (int, error)
	Close() error
}

var (
	errExists   = errors.New("key exists")
	errConflict = errors.New("revision conflict")
)

// objKey names an object the way Kubernetes does: /registry/<resource>/<namespace>/<name>.
type objKey struct {
	Resource, Namespace, Name string
}

func (k objKey) etcdKey() string {
	return "/registry/" + k.Resource + "/" + k.Namespace + "/" + k.Name
}

// cluster is the Wheelhouse cluster every harness object belongs to.
const cluster = "perf"

// Resources used by the phases, so that lists and watches see only their own objects.
const (
	resWrites = "pods"       // throughput phase
	resWatch  = "events"     // watch-latency phase
	resList   = "configmaps" // list and memory phase
)

// valueSize is the size of every stored value.
const valueSize = 1024

// newValue returns a valueSize-byte JSON-looking value carrying the wall-clock time its write started, which
// a watcher in another process subtracts from its own clock (same machine, same clock).
func newValue(start time.Time) []byte {
	v := make([]byte, 0, valueSize)
	v = append(v, `{"ts":`...)
	v = strconv.AppendInt(v, start.UnixNano(), 10)
	v = append(v, `,"pad":"`...)
	for len(v) < valueSize-2 {
		v = append(v, 'x')
	}
	return append(v, `"}`...)
}

// valueTime extracts the time newValue stored.
func valueTime(v []byte) (time.Time, error) {
	const prefix = `{"ts":`
	if len(v) < len(prefix) || string(v[:len(prefix)]) != prefix {
		return time.Time{}, fmt.Errorf("value without timestamp: %.20q", v)
	}
	end := len(prefix)
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	ns, err := strconv.ParseInt(string(v[len(prefix):end]), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("value timestamp: %w", err)
	}
	return time.Unix(0, ns), nil
}
