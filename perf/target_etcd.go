package perf

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdTarget drives anything speaking the etcd v3 API (etcd itself, kine) with the transactions the Kubernetes
// API server's etcd3 storage sends.
type etcdTarget struct {
	cli *clientv3.Client
}

var _ target = (*etcdTarget)(nil)

func dialEtcd(ctx context.Context, endpoint string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		Context:     ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client %s: %w", endpoint, err)
	}
	return cli, nil
}

// Create is the API server's create: put only if the key does not exist. The comparison is on ModRevision, as
// the API server's notFound(key) does; CreateRevision == 0 means the same to etcd, but kine accepts only the
// transaction shapes the API server sends and rejects it ("unsupported operations in txn request").
func (t *etcdTarget) Create(ctx context.Context, k objKey, value []byte) (int64, error) {
	key := k.etcdKey()
	resp, err := t.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value))).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, errExists
	}
	return resp.Header.Revision, nil
}

// Update is the API server's guaranteed update: put if the key is still at rev, else read the current object.
func (t *etcdTarget) Update(ctx context.Context, k objKey, value []byte, rev int64) (int64, error) {
	key := k.etcdKey()
	resp, err := t.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, errConflict
	}
	return resp.Header.Revision, nil
}

// List is an unpaginated range read over the resource's prefix, at the current revision (linearizable).
func (t *etcdTarget) List(ctx context.Context, resource string) (int, error) {
	resp, err := t.cli.Get(ctx, "/registry/"+resource+"/", clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	return len(resp.Kvs), nil
}

func (t *etcdTarget) Close() error { return t.cli.Close() }
