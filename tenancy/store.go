package tenancy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures a Store. Zero values take the defaults noted.
type Config struct {
	// URL is a PostgreSQL connection URL or DSN. The schema (migrations) must already be applied.
	URL string
	// MaxConns bounds the Store's own connection pool (default 4).
	MaxConns int32
	// CacheTTL is how long a cluster lookup is reused without a query (default 10 s; negative disables it).
	CacheTTL time.Duration
	// TokenCacheTTL is how long a successful Authenticate is reused without a query (default 0: never, so a
	// revocation, an expiry or a disabled user made anywhere applies to the next request). A positive TTL
	// trades that for fewer queries: changes made by other processes then take effect within it.
	TokenCacheTTL time.Duration
	// CacheSize bounds the entries of each cache (default 4096).
	CacheSize int
	// Now is the clock (default time.Now); tests inject a fake one.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxConns == 0 {
		c.MaxConns = 4
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = 10 * time.Second
	}
	if c.CacheSize == 0 {
		c.CacheSize = 4096
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports a Config that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("tenancy: Config.URL is required")
	case c.MaxConns < 1:
		return errors.New("tenancy: Config.MaxConns must be at least 1")
	case c.CacheSize < 0:
		return errors.New("tenancy: Config.CacheSize must not be negative")
	}
	return nil
}

// Store reads and writes teams, clusters, users and tokens. It is safe for concurrent use.
type Store struct {
	pool     *pgxpool.Pool
	now      func() time.Time
	log      *slog.Logger
	tokens   *ttlCache[[32]byte, cachedToken]
	clusters *ttlCache[string, Cluster]
}

// Open connects to PostgreSQL and checks that the tenancy schema is there. Close releases the connections.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("tenancy: database URL: %w", ErrInvalid)
	}
	pcfg.MaxConns = cfg.MaxConns
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "wheelhouse-tenancy"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("tenancy: pool: %w", ErrInvalid)
	}
	s := &Store{
		pool:     pool,
		now:      cfg.Now,
		log:      cfg.Logger,
		tokens:   newTTLCache[[32]byte, cachedToken](cfg.TokenCacheTTL, cfg.CacheSize, cfg.Now),
		clusters: newTTLCache[string, Cluster](cfg.CacheTTL, cfg.CacheSize, cfg.Now),
	}
	if err := s.check(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// check makes sure the database answers and has the tenancy schema. Unlike other calls it keeps the driver's
// message (as text) for a database it cannot reach: Open's caller is an operator, who needs the reason.
func (s *Store) check(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "SELECT 1 FROM teams LIMIT 1")
	switch {
	case err == nil:
		return nil
	case pgCode(err) == codeUndefinedTable:
		return fmt.Errorf("tenancy: open: no tenancy tables (are the migrations applied?): %w", ErrInternal)
	case errors.Is(translate("open", err), ErrUnavailable):
		return fmt.Errorf("tenancy: open: %w: %s", ErrUnavailable, err.Error())
	}
	return translate("open", err)
}

// Close closes the connection pool; later calls fail with ErrClosed (cache hits still succeed).
func (s *Store) Close() { s.pool.Close() }

// idPattern is a DNS label (RFC 1123), the form of team and cluster ids; the schema checks the same.
var idPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// ValidID reports whether id is a valid team or cluster id: a DNS label of at most 63 characters.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// validUUID reports whether s is a UUID in its canonical text form.
func validUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
