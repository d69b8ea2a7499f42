package install

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// newEcho is an Echo app with a Handler of cfg mounted.
func newEcho(t *testing.T, cfg Config) *echo.Echo {
	t.Helper()
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	h.Register(e)
	return e
}

// serve runs req against e and returns the response.
func serve(e *echo.Echo, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeFile(t *testing.T, path string, content []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScriptDefaultServer(t *testing.T) {
	e := newEcho(t, Config{})
	for _, tc := range []struct {
		name, host, forwardedProto string
		want                       string
	}{
		{"host and port", "wh.example.com:8443", "", "WH_DEFAULT_SERVER='http://wh.example.com:8443'"},
		{"behind a TLS proxy", "wh.example.com", "https", "WH_DEFAULT_SERVER='https://wh.example.com'"},
		{"IPv6", "[::1]:8080", "", "WH_DEFAULT_SERVER='http://[::1]:8080'"},
		{"a host that is not a host name", "x';reboot;'", "", "WH_DEFAULT_SERVER=''"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, ScriptPath, nil)
			req.Host = tc.host
			req.RemoteAddr = "127.0.0.1:40000" // a proxy on this machine: its X-Forwarded-Proto is trusted
			if tc.forwardedProto != "" {
				req.Header.Set("X-Forwarded-Proto", tc.forwardedProto)
			}
			rec := serve(e, req)
			if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/x-shellscript") {
				t.Fatalf("GET %s: %d %s", ScriptPath, rec.Code, rec.Header().Get("Content-Type"))
			}
			if body := rec.Body.String(); !strings.Contains(body, "\n\t"+tc.want+"\n") {
				t.Errorf("the script does not set %s", tc.want)
			}
		})
	}
}

// TestScriptOverTLS checks the URL of a TLS request, as the one-liner fetches it.
func TestScriptOverTLS(t *testing.T) {
	ts := httptest.NewTLSServer(newEcho(t, Config{}))
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL + ScriptPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := "WH_DEFAULT_SERVER='" + ts.URL + "'"; !strings.Contains(string(body), want) {
		t.Errorf("the script does not set %s", want)
	}
	if !strings.HasSuffix(string(body), "\nwheelhouse_install \"$@\"\n") {
		t.Error("the script's last line is not the call of wheelhouse_install")
	}
}

func TestBinaryAndChecksum(t *testing.T) {
	dir := t.TempDir()
	explicit := writeFile(t, filepath.Join(dir, "explicit"), []byte("explicit agent"))
	prebuilt := t.TempDir()
	writeFile(t, filepath.Join(prebuilt, "wheelhouse-linux-riscv64"), []byte("riscv agent"))
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	e := newEcho(t, Config{BinaryDir: prebuilt, Binaries: map[string]string{"mips": explicit}})
	for _, tc := range []struct {
		name, query string
		want        []byte // nil: a problem
		status      int
		detail      string
	}{
		{"explicit", "arch=mips", []byte("explicit agent"), http.StatusOK, ""},
		{"from the binary dir", "arch=riscv64", []byte("riscv agent"), http.StatusOK, ""},
		{"the server's own", "arch=" + runtime.GOARCH, own, http.StatusOK, ""},
		{"unknown arch", "arch=ppc64le", nil, http.StatusNotFound, "no agent binary for arch ppc64le on this server"},
		{"path in arch", "arch=../../etc/passwd", nil, http.StatusBadRequest, "the query parameter arch must be a Go architecture such as amd64 or arm64"},
		{"no arch", "", nil, http.StatusBadRequest, "the query parameter arch must be a Go architecture such as amd64 or arm64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := serve(e, httptest.NewRequest(http.MethodGet, BinaryPath+"?"+tc.query, nil))
			sum := serve(e, httptest.NewRequest(http.MethodGet, ChecksumPath+"?"+tc.query, nil))
			if bin.Code != tc.status || sum.Code != tc.status {
				t.Fatalf("binary %d, checksum %d; want %d", bin.Code, sum.Code, tc.status)
			}
			if tc.want == nil {
				for _, rec := range []*httptest.ResponseRecorder{bin, sum} {
					var p problem
					if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Header().Get("Content-Type") != "application/problem+json" {
						t.Fatalf("not a problem+json: %s %q", rec.Header().Get("Content-Type"), rec.Body.String())
					}
					if p.Detail != tc.detail || p.Status != tc.status {
						t.Errorf("problem %+v; want status %d, detail %q", p, tc.status, tc.detail)
					}
				}
				return
			}
			if bin.Header().Get("Content-Type") != "application/octet-stream" || !bytes.Equal(bin.Body.Bytes(), tc.want) {
				t.Errorf("binary: %s, %d bytes; want %d bytes", bin.Header().Get("Content-Type"), bin.Body.Len(), len(tc.want))
			}
			if got, want := sum.Body.String(), sha256Hex(tc.want)+"\n"; got != want {
				t.Errorf("checksum %q, want %q", got, want)
			}
		})
	}
}

// TestChecksumCache: a checksum is computed once per file, and again when the file's size or time changes.
func TestChecksumCache(t *testing.T) {
	path := writeFile(t, filepath.Join(t.TempDir(), "agent"), []byte("version 1"))
	e := newEcho(t, Config{Binaries: map[string]string{"amd64": path}})
	sum := func() string {
		return strings.TrimSpace(serve(e, httptest.NewRequest(http.MethodGet, ChecksumPath+"?arch=amd64", nil)).Body.String())
	}
	if got := sum(); got != sha256Hex([]byte("version 1")) {
		t.Fatalf("checksum %s", got)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Same size and time: the cached sum, though the bytes changed (proof that it is cached).
	writeFile(t, path, []byte("version 2"))
	if err := os.Chtimes(path, time.Time{}, st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := sum(); got != sha256Hex([]byte("version 1")) {
		t.Errorf("checksum %s: recomputed for an unchanged size and time", got)
	}
	if err := os.Chtimes(path, time.Time{}, st.ModTime().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := sum(); got != sha256Hex([]byte("version 2")) {
		t.Errorf("checksum %s after the file's time changed; want version 2's", got)
	}
	writeFile(t, path, []byte("version 3, longer"))
	if got := sum(); got != sha256Hex([]byte("version 3, longer")) {
		t.Errorf("checksum %s after the file's size changed; want version 3's", got)
	}
}

func TestConfigValidate(t *testing.T) {
	file := writeFile(t, filepath.Join(t.TempDir(), "f"), nil)
	for _, dir := range []string{"/nonexistent/wheelhouse", file} {
		if _, err := New(Config{BinaryDir: dir}); err == nil {
			t.Errorf("New accepted the binary dir %s", dir)
		}
	}
}
