package store

import (
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/wheelhouse-dev/wheelhouse/store/pgtest"
)

// withPoolConfig lets a test adjust the pgx pool (for example its dialer) before Open connects.
func withPoolConfig(f func(*pgxpool.Config)) func(*Config) {
	return func(c *Config) { c.configurePool = f }
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func pgtestDB(tb testing.TB) string { return pgtest.NewDatabase(tb) }
