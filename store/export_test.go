package store

import "github.com/jackc/pgx/v5/pgxpool"

// withPoolConfig lets a test adjust the pgx pool (for example its dialer) before Open connects.
func withPoolConfig(f func(*pgxpool.Config)) func(*Config) {
	return func(c *Config) { c.configurePool = f }
}
