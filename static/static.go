// Package static holds the dashboard's stylesheet and script (no framework, no build step), embedded in the
// binary and served with long-lived caching under content-hashed URLs.
package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is where the files are served.
const Prefix = "/static/"

//go:embed app.css live.js
var files embed.FS

// Files serves the embedded files.
type Files struct {
	content map[string][]byte
	hash    map[string]string
}

// New loads the embedded files.
func New() *Files {
	f := &Files{content: map[string][]byte{}, hash: map[string]string{}}
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		f.content[e.Name()] = b
		f.hash[e.Name()] = hex.EncodeToString(sum[:6])
	}
	return f
}

// URL is name's address, with its content hash so a new build is fetched anew.
func (f *Files) URL(name string) string { return Prefix + name + "?v=" + f.hash[name] }

// ServeHTTP serves a file; with the current hash in its query it may be cached for a year.
func (f *Files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	b, ok := f.content[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.URL.Query().Get("v") == f.hash[name] {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+f.hash[name]+`"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	ctype := "text/plain; charset=utf-8"
	switch path.Ext(name) {
	case ".css":
		ctype = "text/css; charset=utf-8"
	case ".js":
		ctype = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ctype)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
