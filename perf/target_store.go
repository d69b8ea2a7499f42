package perf

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/wheelhouse-dev/wheelhouse/store"
)

// storeTarget drives the Wheelhouse store in process, as the API server would.
type storeTarget struct {
	s *store.Store
}

var _ target = (*storeTarget)(nil)

// openStore opens a store with its production defaults except compaction, which is off, as it is for etcd and
// kine in this harness (Kubernetes would compact all three every five minutes).
func openStore(ctx context.Context, url string, log *slog.Logger) (*store.Store, error) {
	s, err := store.Open(ctx, store.Config{URL: url, Logger: log, Retention: -1})
	if err != nil {
		return nil, fmt.Errorf("wheelhouse: open store: %w", err)
	}
	return s, nil
}

func whKey(k objKey) store.Key {
	return store.Key{Cluster: cluster, Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}
}

func (t *storeTarget) Create(ctx context.Context, k objKey, value []byte) (int64, error) {
	obj, err := t.s.Create(ctx, whKey(k), value)
	if errors.Is(err, store.ErrExists) {
		return 0, errExists
	}
	return obj.Revision, err
}

func (t *storeTarget) Update(ctx context.Context, k objKey, value []byte, rev int64) (int64, error) {
	obj, err := t.s.Update(ctx, whKey(k), value, rev)
	if errors.Is(err, store.ErrConflict) {
		return 0, errConflict
	}
	return obj.Revision, err
}

func (t *storeTarget) List(ctx context.Context, resource string) (int, error) {
	res, err := t.s.List(ctx, store.ListOptions{Cluster: cluster, Resource: resource})
	return len(res.Items), err
}

func (t *storeTarget) Close() error {
	t.s.Close()
	return nil
}
