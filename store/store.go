package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures a Store. Zero values take the defaults noted.
type Config struct {
	// URL is a PostgreSQL connection URL or DSN. The schema (migrations) must already be applied.
	URL string
	// MaxConns bounds the connection pool of reads (default 16). The store's own work has connections apart,
	// so that reads piling up can never starve the writers or the watch hub that feeds every watcher: Writers
	// for the writers, one for the watch hub, one for the compactor and commit checks, one for LISTEN.
	MaxConns int32
	// Writers is how many batches may be in flight from this process at once (default 2): while one holds the
	// revision lock the next is already assembled and waiting.
	Writers int
	// MaxBatch bounds the operations committed in one transaction (default 256).
	MaxBatch int
	// WriteTimeout bounds one batch when callers have no earlier deadline (default 30 s).
	WriteTimeout time.Duration
	// WatchBuffer is each watcher's event buffer; a watcher that falls further behind is closed (default 4096).
	WatchBuffer int
	// PollInterval is how often history is polled when no notification arrives (default 1 s).
	PollInterval time.Duration
	// ProgressInterval is how often watchers that asked for progress get a bookmark (default 1 s).
	ProgressInterval time.Duration
	// Retention is how much history the background compactor keeps (default 5 min; negative disables it).
	Retention time.Duration
	// CompactInterval is how often the compactor runs (default Retention/10, at most 1 min).
	CompactInterval time.Duration
	// QueryTimeout bounds the store's own background queries (hub polls, catch-up pages), so a connection that
	// hangs without closing cannot stall watchers forever (default 15 s). Connecting is bounded by the URL's
	// connect_timeout, 10 s when unset.
	QueryTimeout time.Duration
	// ListenIdle is how long the LISTEN connection may stay silent before it is replaced, which also detects a
	// connection that died without closing (default 30 s).
	ListenIdle time.Duration
	Logger     *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.MaxConns == 0 {
		c.MaxConns = 16
	}
	if c.Writers == 0 {
		c.Writers = 2
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	if c.WatchBuffer == 0 {
		c.WatchBuffer = 4096
	}
	def(&c.WriteTimeout, 30*time.Second)
	def(&c.PollInterval, time.Second)
	def(&c.ProgressInterval, time.Second)
	def(&c.Retention, 5*time.Minute)
	def(&c.CompactInterval, min(c.Retention/10, time.Minute))
	def(&c.QueryTimeout, 15*time.Second)
	def(&c.ListenIdle, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("store: Config.URL is required")
	case c.MaxConns < 1:
		return errors.New("store: Config.MaxConns must be at least 1")
	case c.Writers < 1 || c.Writers > 64:
		return errors.New("store: Config.Writers must be 1 to 64")
	case c.MaxBatch < 1:
		return errors.New("store: Config.MaxBatch must be at least 1")
	case c.WatchBuffer < 16:
		return errors.New("store: Config.WatchBuffer must be at least 16")
	}
	return nil
}

// Store is the object store. It is safe for concurrent use.
type Store struct {
	cfg  Config
	pool *pgxpool.Pool // reads
	// sys is the pool of the store's own work (writers, watch hub, compactor): Writers+2 connections.
	sys     *pgxpool.Pool
	listen  *pgx.ConnConfig
	log     *slog.Logger
	ops     chan *op
	urgent  chan *op // writes under WithPriority, taken before ops
	hub     *hub
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
	hooks   hooks
}

// urgentQueue bounds the priority writes waiting at once (heartbeats: a handful).
const urgentQueue = 64

// hooks are test seams; all nil in production.
type hooks struct {
	afterBegin   func()         // inside the batch transaction, before the revision lock
	beforeCommit func()         // after the batch's statements, before COMMIT
	afterPoll    func(rows int) // after each hub poll
}

// Open connects to PostgreSQL and starts the store's writers, watch hub, listener and compactor. Close stops them.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", ErrInvalid)
	}
	pcfg.MaxConns = cfg.MaxConns
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "wheelhouse"
	listen := pcfg.ConnConfig.Copy()
	listen.RuntimeParams["application_name"] = "wheelhouse-listen"
	scfg := pcfg.Copy()
	scfg.MaxConns = int32(cfg.Writers) + 2
	scfg.ConnConfig.RuntimeParams["application_name"] = "wheelhouse-store"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("pool: %w", ErrInvalid)
	}
	sys, err := pgxpool.NewWithConfig(ctx, scfg)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("pool: %w", ErrInvalid)
	}
	s := &Store{cfg: cfg, pool: pool, sys: sys, listen: listen, log: cfg.Logger, ops: make(chan *op, cfg.MaxBatch*cfg.Writers),
		urgent: make(chan *op, urgentQueue)}
	start, err := s.CurrentRevision(ctx)
	if err != nil {
		pool.Close()
		sys.Close()
		return nil, err
	}
	s.hub = newHub(s, start)
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.spawn(func() { s.hub.run(runCtx) })
	s.spawn(func() { s.listenLoop(runCtx) })
	for range cfg.Writers {
		s.spawn(func() { s.writeLoop(runCtx) })
	}
	if cfg.Retention > 0 {
		s.spawn(func() { s.compactLoop(runCtx) })
	}
	return s, nil
}

func (s *Store) spawn(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Close stops background work, closes every watcher (their Err is ErrClosed) and the pool. Writes still queued
// fail with ErrClosed.
func (s *Store) Close() {
	s.closeMu.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.hub.closeAll(ErrClosed)
		s.failQueued()
		s.pool.Close()
		s.sys.Close()
	})
}

// CurrentRevision is the highest committed revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.pool.QueryRow(ctx, "SELECT rev FROM wh_meta WHERE id = 1").Scan(&rev)
	return rev, translate("current revision", nil, err)
}

// KnownCompactRevision is the compaction revision this process has seen (through its watch hub's polls and its
// own compactions), without a query. It may lag behind CompactRevision; it is never ahead of it.
func (s *Store) KnownCompactRevision() int64 { return s.hub.knownCompacted() }

// CompactRevision is the revision history has been compacted to (0 if never).
func (s *Store) CompactRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.pool.QueryRow(ctx, "SELECT rev FROM wh_compact WHERE id = 1").Scan(&rev)
	return rev, translate("compact revision", nil, err)
}
