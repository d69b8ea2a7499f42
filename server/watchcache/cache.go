// Package watchcache keeps, in each server process, the current objects and the recent events of every
// (cluster, resource) that someone lists or watches, fed by one store watch per collection. The Kubernetes API
// serves watches, resourceVersion=0 lists and consistent lists from it: objects are decoded once per version
// (not once per reader), lists need no database scan, and a thousand watchers of one resource cost one store
// watcher. The design and the resourceVersion rules are in docs/design/kubeapi.md.
//
// A collection starts on first use (a list of the resource at one revision, then a watch from that revision)
// and is dropped after Config.Idle without readers or watchers. Whenever a collection cannot follow the store
// (its store watch ends) it is dropped and its watches end with ErrReset; clients resume from their last
// resourceVersion, which the next collection or the store serves.
package watchcache

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// Source is what the cache reads (*store.Store implements it).
type Source interface {
	List(ctx context.Context, opts store.ListOptions) (store.ListResult, error)
	ScanResource(ctx context.Context, resource string, fn func(store.Object) error) (int64, error)
	Watch(ctx context.Context, opts store.WatchOptions) (*store.Watcher, error)
	CurrentRevision(ctx context.Context) (int64, error)
	KnownCompactRevision() int64
}

var _ Source = (*store.Store)(nil)

// Config configures a Cache. Zero values take the defaults noted.
type Config struct {
	Source Source
	// Window is how many recent events each collection keeps at least for watches that start in the past
	// (default 4096); it grows to MaxWindow (default 100 Ki) to keep every event younger than WindowAge (default
	// 75 s), and shrinks back once they are older.
	Window    int
	MaxWindow int
	WindowAge time.Duration
	// WatchBuffer is how many events may wait for one watch; a watch further behind ends with ErrSlow and its
	// client resumes (default 4096).
	WatchBuffer int
	// Idle drops a collection nobody listed or watched for this long (default 10 min).
	Idle time.Duration
	// FreshTimeout bounds how long a read waits for a collection to reach a revision (default 3 s, as upstream).
	FreshTimeout time.Duration
	// Index, when set, names for a stored resource the function of its one secondary index (nil: none), for
	// Collection.ListIndexed: the node authorizer finds a node's pods by spec.nodeName without scanning every
	// pod, as upstream's node authorizer keeps a graph.
	Index  func(resource string) func(runtime.Object) string
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Window <= 0 {
		c.Window = 4096
	}
	if c.MaxWindow <= 0 {
		c.MaxWindow = 100 << 10
	}
	c.MaxWindow = max(c.MaxWindow, c.Window)
	if c.WindowAge <= 0 {
		c.WindowAge = 75 * time.Second
	}
	if c.WatchBuffer <= 0 {
		c.WatchBuffer = 4096
	}
	if c.Idle <= 0 {
		c.Idle = 10 * time.Minute
	}
	if c.FreshTimeout <= 0 {
		c.FreshTimeout = 3 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Kind names one collection.
type Kind struct {
	// Cluster is the collection's cluster; "" makes a cross-cluster collection holding the resource of every
	// cluster (for the controllers and the scheduler, which serve all clusters at once).
	Cluster  string
	Resource string // the store's resource, for example "pods" or "deployments.apps"
	// Type names the decoded form (the served kind): one stored resource served as two kinds is two collections.
	Type string
}

// Decoder turns a stored object version into the object the cache keeps (with its resourceVersion set).
type Decoder func(store.Object) (runtime.Object, error)

var (
	// ErrTooOld: the revision is below the collection's window (or the store's compaction); read the store.
	ErrTooOld = errors.New("watchcache: revision older than the cache's window")
	// ErrNotFresh: the collection did not reach the revision within FreshTimeout; read the store.
	ErrNotFresh = errors.New("watchcache: cache did not reach the revision in time")
	// ErrSlow ends a watch whose client does not keep up.
	ErrSlow = errors.New("watchcache: watcher too slow")
	// ErrReset ends the watches of a collection that lost its store watch.
	ErrReset = errors.New("watchcache: collection reset")
	// ErrClosed: the cache is closed.
	ErrClosed = errors.New("watchcache: closed")
)

// Cache holds the collections of one process.
type Cache struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex // guards cols
	cols map[Kind]*Collection
}

// New starts a cache; Close stops it.
func New(cfg Config) *Cache {
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{cfg: cfg, ctx: ctx, cancel: cancel, cols: map[Kind]*Collection{}}
	c.wg.Add(1)
	go c.janitor()
	return c
}

// Close stops every collection; their watches end with ErrClosed.
func (c *Cache) Close() {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	cols := c.cols
	c.cols = map[Kind]*Collection{}
	c.mu.Unlock()
	for _, col := range cols {
		col.fail(ErrClosed)
	}
}

// Collection returns k's collection once it holds the resource's state, starting it if needed. dec is used
// only when this call starts it.
func (c *Cache) Collection(ctx context.Context, k Kind, dec Decoder) (*Collection, error) {
	c.mu.Lock()
	if c.ctx.Err() != nil {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	col, ok := c.cols[k]
	if !ok {
		col = newCollection(c, k, dec)
		c.cols[k] = col
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			col.run(c.ctx)
		}()
	}
	c.mu.Unlock()
	col.touch()
	select {
	case <-col.synced:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := col.failed(); err != nil {
		return nil, err
	}
	return col, nil
}

// Peek returns k's collection if it is already running and holds the resource's state, else nil. It never
// starts one: for callers that only profit from a copy at hand (an update starting from a recent version) and
// must not make the process load a whole resource.
func (c *Cache) Peek(k Kind) *Collection {
	c.mu.Lock()
	col := c.cols[k]
	c.mu.Unlock()
	if col == nil {
		return nil
	}
	select {
	case <-col.synced:
	default:
		return nil
	}
	if col.failed() != nil {
		return nil
	}
	return col
}

// drop forgets col if it is still k's collection.
func (c *Cache) drop(col *Collection) {
	c.mu.Lock()
	if c.cols[col.kind] == col {
		delete(c.cols, col.kind)
	}
	c.mu.Unlock()
}

// DropCluster drops every collection of cluster (a deleted cluster), and every cross-cluster collection that
// still holds an object of it (the store deletes a cluster's objects without events, so they would stay there
// for good); their watches end with ErrReset, and a cross-cluster collection's followers start over from a
// fresh one without the cluster. Cross-cluster collections without its objects are left alone, so a second call
// costs nothing.
func (c *Cache) DropCluster(cluster string) {
	if cluster == "" {
		return
	}
	c.mu.Lock()
	var drop []*Collection
	for k, col := range c.cols {
		if k.Cluster == cluster || k.Cluster == "" && col.holdsCluster(cluster) {
			drop = append(drop, col)
			delete(c.cols, k)
		}
	}
	c.mu.Unlock()
	for _, col := range drop {
		col.fail(ErrReset)
	}
}

// Len is how many collections are live.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cols)
}

// janitor drops collections that have been idle for Config.Idle.
func (c *Cache) janitor() {
	defer c.wg.Done()
	t := time.NewTicker(min(c.cfg.Idle/4, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case now := <-t.C:
			c.dropIdle(now)
		}
	}
}

func (c *Cache) dropIdle(now time.Time) {
	c.mu.Lock()
	var idle []*Collection
	for k, col := range c.cols {
		if col.idleSince(now) >= c.cfg.Idle {
			idle = append(idle, col)
			delete(c.cols, k)
		}
	}
	c.mu.Unlock()
	for _, col := range idle {
		col.fail(ErrReset)
	}
}
