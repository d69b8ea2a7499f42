package install

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"text/template"

	"github.com/labstack/echo/v4"
)

// Paths of the endpoints.
const (
	ScriptPath   = "/install.sh"
	BinaryPath   = "/platform/v1/agent/binary"
	ChecksumPath = "/platform/v1/agent/binary.sha256"
)

//go:embed install.sh.tmpl
var scriptSource string

var scriptTemplate = template.Must(template.New("install.sh").Parse(scriptSource))

// Config configures the endpoints. The zero Config serves the server's own executable for its own arch.
type Config struct {
	// BinaryDir holds prebuilt agents named wheelhouse-linux-<arch> for the arches other than the server's own.
	BinaryDir string
	// Binaries names the agent binary of an arch explicitly, ahead of everything else (tests, packagers).
	Binaries map[string]string
	Logger   *slog.Logger
}

// Validate reports a Config that cannot work: a BinaryDir that is not a readable directory.
func (c Config) Validate() error {
	if c.BinaryDir == "" {
		return nil
	}
	if st, err := os.Stat(c.BinaryDir); err != nil || !st.IsDir() {
		return fmt.Errorf("install: the agent binary directory %q is not a directory", c.BinaryDir)
	}
	return nil
}

// Handler serves the install script and the agent binaries.
type Handler struct {
	cfg  Config
	log  *slog.Logger
	bins *binaries
}

// New builds the handler.
func New(cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg, log: cfg.Logger, bins: newBinaries(cfg.BinaryDir, cfg.Binaries)}, nil
}

// Register mounts the endpoints on e (the static binary paths outrank the platform API's /platform/v1/*).
func (h *Handler) Register(e *echo.Echo) {
	e.GET(ScriptPath, h.serveScript)
	e.GET(BinaryPath, h.serveBinary)
	e.GET(ChecksumPath, h.serveChecksum)
}

// safeHost is a Host header that may go into the script: a name or an address, and a port.
var safeHost = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]+)?$`)

// serveScript renders the script with this server's URL, as the client reached it, as the default --server. A
// Host that could not be a host name leaves no default (the script then needs --server).
func (h *Handler) serveScript(c echo.Context) error {
	server := ""
	if host := c.Request().Host; safeHost.MatchString(host) {
		server = c.Scheme() + "://" + host
	}
	var b bytes.Buffer
	if err := scriptTemplate.Execute(&b, struct{ Server string }{shellQuote(server)}); err != nil {
		h.log.ErrorContext(c.Request().Context(), "rendering install.sh failed", "err", err)
		return writeProblem(c, http.StatusInternalServerError, "internal", "Internal error", "the install script could not be rendered")
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/x-shellscript; charset=utf-8", b.Bytes())
}

// validArch is the form of a GOARCH; it keeps the query out of file paths.
var validArch = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// archFile resolves the arch query to a file, or writes the problem and returns "".
func (h *Handler) archFile(c echo.Context) (string, error) {
	arch := c.QueryParam("arch")
	if !validArch.MatchString(arch) {
		return "", writeProblem(c, http.StatusBadRequest, "bad-request", "Bad request", "the query parameter arch must be a Go architecture such as amd64 or arm64")
	}
	path, ok := h.bins.path(arch)
	if !ok {
		return "", writeProblem(c, http.StatusNotFound, "not-found", "Not found", "no agent binary for arch "+arch+" on this server")
	}
	return path, nil
}

// serveBinary serves the agent binary of the requested arch (ranges and conditional requests included).
func (h *Handler) serveBinary(c echo.Context) error {
	path, err := h.archFile(c)
	if path == "" {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return h.unreadable(c, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return h.unreadable(c, path, err)
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/octet-stream")
	w.Header().Set(echo.HeaderContentDisposition, `attachment; filename="wheelhouse-linux-`+c.QueryParam("arch")+`"`)
	http.ServeContent(w, c.Request(), "", st.ModTime(), f)
	return nil
}

// serveChecksum serves the SHA-256 of the file serveBinary serves for the same arch.
func (h *Handler) serveChecksum(c echo.Context) error {
	path, err := h.archFile(c)
	if path == "" {
		return err
	}
	sum, err := h.bins.sum(path)
	if err != nil {
		return h.unreadable(c, path, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", []byte(sum+"\n"))
}

// unreadable logs why a configured binary cannot be served and answers without revealing it.
func (h *Handler) unreadable(c echo.Context, path string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return writeProblem(c, http.StatusNotFound, "not-found", "Not found", "no agent binary for arch "+c.QueryParam("arch")+" on this server")
	}
	h.log.ErrorContext(c.Request().Context(), "reading an agent binary failed", "path", path, "err", err)
	return writeProblem(c, http.StatusInternalServerError, "internal", "Internal error", "the agent binary could not be read")
}

// problem is an RFC 9457 problem detail, as the platform API writes them.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
}

func writeProblem(c echo.Context, status int, code, title, detail string) error {
	b, err := json.Marshal(problem{Type: "https://wheelhouse.dev/problems/" + code, Title: title, Status: status,
		Detail: detail, Instance: c.Request().URL.Path})
	if err != nil {
		return err
	}
	return c.Blob(status, "application/problem+json", b)
}

// shellQuote is s as one single-quoted sh word.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
