package perf

import (
	"context"
	"fmt"
	"time"
)

// listNamespaces spreads the listed objects, and the held watches, over namespaces.
const listNamespaces = 100

func listNamespace(i int) string { return fmt.Sprintf("ns-%03d", i%listNamespaces) }

// loadObjects creates objects [from, to) of the list resource with 16 writers (kine slows down with more).
func loadObjects(ctx context.Context, t target, from, to int) error {
	value := newValue(time.Now())
	return parallel(ctx, 16, to-from, func(ctx context.Context, i int) error {
		i += from
		k := objKey{Resource: resList, Namespace: listNamespace(i), Name: fmt.Sprintf("cm-%07d", i)}
		if _, err := t.Create(ctx, k, value); err != nil {
			return fmt.Errorf("load object %d: %w", i, err)
		}
		return nil
	})
}

// listPhase grows the target's list resource through cfg.ListSizes, timing unpaginated lists at each size;
// at the largest size it also opens cfg.Watches watches and reads memory.
func (r *runner) listPhase(ctx context.Context, sys *system) {
	loaded := 0
	for i, size := range r.cfg.ListSizes {
		r.log.Info("loading objects", "target", sys.name, "objects", size)
		if err := loadObjects(ctx, sys.t, loaded, size); err != nil {
			r.res.Lists = append(r.res.Lists, ListResult{Target: sys.name, Objects: size, Err: err.Error()})
			return
		}
		loaded = size
		r.vacuum(ctx, sys)
		if i == len(r.cfg.ListSizes)-1 {
			r.log.Info("memory with watches open", "target", sys.name, "objects", size, "watches", r.cfg.Watches)
			r.res.Memory = append(r.res.Memory, r.holdWatches(ctx, sys, size))
		}
		r.log.Info("listing", "target", sys.name, "objects", size)
		r.res.Lists = append(r.res.Lists, r.timeLists(ctx, sys, size))
	}
}

func (r *runner) timeLists(ctx context.Context, sys *system, size int) ListResult {
	res := ListResult{Target: sys.name, Objects: size}
	for range r.cfg.ListRepetitions {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		t0 := time.Now()
		n, err := sys.t.List(lctx, resList)
		d := time.Since(t0)
		cancel()
		switch {
		case err != nil:
			res.Err = err.Error()
			return res
		case n != size:
			res.Err = fmt.Sprintf("listed %d objects, want %d", n, size)
			return res
		}
		res.Durations = append(res.Durations, d)
	}
	return res
}

// dataSize is the on-disk size of a target's data: its PostgreSQL database, or etcd's backend file.
func (r *runner) dataSize(ctx context.Context, sys *system) int64 {
	var n int64
	switch {
	case sys.pgBacked && r.pg != nil:
		_ = r.pg.admin.QueryRow(ctx, "SELECT pg_database_size($1)", sys.database).Scan(&n)
	case sys.name == Etcd:
		if et, ok := sys.t.(*etcdTarget); ok {
			if st, err := et.cli.Status(ctx, et.cli.Endpoints()[0]); err == nil {
				n = st.DbSize
			}
		}
	}
	return n
}
