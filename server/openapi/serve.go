package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/munnerz/goautoneg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// immutable is the Cache-Control of a v3 document fetched by its current hash: its content never changes.
const immutable = "public, max-age=31536000, immutable"

// gzipMin is the smallest body worth compressing.
const gzipMin = 1024

// document is one OpenAPI document in the forms it is served in.
type document struct {
	hash  string                          // upper-case hex SHA-512 of the JSON form; the v3 ?hash= parameter
	json  *representation                 // built with the document
	proto func() (*representation, error) // built on first use
}

// representation is one encoding of a document, with its entity tag and, on first use, its gzip form.
type representation struct {
	contentType string
	body        []byte
	etag        string // quoted
	gzipped     func() []byte
}

func newDocument(data []byte, protoType string, toProto func([]byte) ([]byte, error)) *document {
	hash := hexHash(data)
	d := &document{hash: hash, json: newRepresentation("application/json", data, hash)}
	d.proto = sync.OnceValues(func() (*representation, error) {
		pb, err := toProto(data)
		if err != nil {
			return nil, err
		}
		return newRepresentation(protoType, pb, hexHash(pb)), nil
	})
	return d
}

func newRepresentation(contentType string, body []byte, hash string) *representation {
	return &representation{contentType: contentType, body: body, etag: strconv.Quote(hash),
		gzipped: sync.OnceValue(func() []byte {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(body) // writes to a bytes.Buffer do not fail
			_ = zw.Close()
			return buf.Bytes()
		})}
}

// hexHash is the upper-case hex SHA-512 of data, as Kubernetes computes OpenAPI entity tags.
func hexHash(data []byte) string { return fmt.Sprintf("%X", sha512.Sum512(data)) }

// ServeV2 serves the Swagger 2.0 document (GET /openapi/v2): JSON, or gnostic protobuf when the Accept header
// asks for application/com.github.proto-openapi.spec.v2@v1.0+protobuf (as client-go discovery and kubectl do)
// or its newer name. It answers 304 to a matching If-None-Match, 406 to an Accept it cannot meet and compresses
// with gzip when the client accepts it.
func (s *Spec) ServeV2(w http.ResponseWriter, r *http.Request) {
	if !allowed(w, r) {
		return
	}
	w.Header().Add("Vary", "Accept")
	rep, code := negotiate(r, s.v2, mediaV2Proto, mediaV2ProtoDeprecated)
	if code != http.StatusOK {
		writeStatus(w, code)
		return
	}
	write(w, r, rep, "")
}

// v3Discovery is the body of /openapi/v3: where each group version's document is.
type v3Discovery struct {
	Paths map[string]v3DiscoveryEntry `json:"paths"`
}

type v3DiscoveryEntry struct {
	ServerRelativeURL string `json:"serverRelativeURL"`
}

// ServeV3Root serves the v3 discovery document (GET <prefix>/openapi/v3): for each group version path
// ("apis/apps/v1") the URL of its document, <prefix>/openapi/v3/apis/apps/v1?hash=HASH, where prefix is the
// path the API is served under ("/clusters/default", or "" at the root). JSON only; ETag and If-None-Match as
// for the documents.
func (s *Spec) ServeV3Root(w http.ResponseWriter, r *http.Request, prefix string) {
	if !allowed(w, r) {
		return
	}
	root := v3Discovery{Paths: make(map[string]v3DiscoveryEntry, len(s.v3))}
	for gv, doc := range s.v3 {
		root.Paths[gv] = v3DiscoveryEntry{ServerRelativeURL: v3URL(prefix, gv, doc.hash)}
	}
	data, err := json.Marshal(root)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError)
		return
	}
	write(w, r, newRepresentation("application/json", data, hexHash(data)), "")
}

// ServeV3GroupVersion serves the v3 document of one group version (GET <prefix>/openapi/v3/<gvPath>, gvPath
// "api/v1" or "apis/apps/v1"): JSON, or gnostic protobuf for
// application/com.github.proto-openapi.spec.v3@v1.0+protobuf. An unknown group version is a 404. As in
// Kubernetes, a request carrying the document's current ?hash= is answered with immutable caching headers, and one
// carrying an older hash is redirected (301) to the current URL.
func (s *Spec) ServeV3GroupVersion(w http.ResponseWriter, r *http.Request, prefix, gvPath string) {
	if !allowed(w, r) {
		return
	}
	doc, ok := s.v3[strings.Trim(gvPath, "/")]
	if !ok {
		writeStatus(w, http.StatusNotFound)
		return
	}
	w.Header().Add("Vary", "Accept")
	cacheControl := ""
	if hash := r.URL.Query().Get("hash"); hash != "" {
		if hash != doc.hash {
			http.Redirect(w, r, v3URL(prefix, strings.Trim(gvPath, "/"), doc.hash), http.StatusMovedPermanently)
			return
		}
		cacheControl = immutable
	}
	rep, code := negotiate(r, doc, mediaV3Proto, mediaV3ProtoDeprecated)
	if code != http.StatusOK {
		writeStatus(w, code)
		return
	}
	write(w, r, rep, cacheControl)
}

func v3URL(prefix, gv, hash string) string {
	u := url.URL{Path: strings.TrimSuffix(prefix, "/") + "/openapi/v3/" + gv, RawQuery: "hash=" + hash}
	return u.String()
}

// negotiate picks the representation the Accept header prefers: JSON for application/json and wildcards, protobuf
// for either of its names. The code is 406 when none is acceptable and 500 when the protobuf form cannot be built.
func negotiate(r *http.Request, doc *document, protoTypes ...string) (*representation, int) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	offers := append([]string{"application/json"}, protoTypes...)
	for _, clause := range goautoneg.ParseAccept(accept) {
		if clause.Q <= 0 {
			continue
		}
		for i, offer := range offers {
			typ, sub, _ := strings.Cut(offer, "/")
			if (clause.Type != typ && clause.Type != "*") || (clause.SubType != sub && clause.SubType != "*") {
				continue
			}
			if i == 0 {
				return doc.json, http.StatusOK
			}
			rep, err := doc.proto()
			if err != nil {
				return nil, http.StatusInternalServerError
			}
			return rep, http.StatusOK
		}
	}
	return nil, http.StatusNotAcceptable
}

// write sends a representation: 304 when If-None-Match names its entity tag, else the body, gzipped when the
// client accepts it.
func write(w http.ResponseWriter, r *http.Request, rep *representation, cacheControl string) {
	h := w.Header()
	h.Set("Content-Type", rep.contentType)
	h.Set("ETag", rep.etag)
	h.Add("Vary", "Accept-Encoding")
	if cacheControl != "" {
		h.Set("Cache-Control", cacheControl)
	}
	if etagMatches(r.Header.Get("If-None-Match"), rep.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := rep.body
	if len(body) >= gzipMin && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = rep.gzipped()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body) // the client went away; nothing to do
	}
}

// etagMatches implements If-None-Match's weak comparison against a strong entity tag.
func etagMatches(header, etag string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if c := strings.TrimSpace(coding); c != "gzip" && c != "*" {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		if v, err := strconv.ParseFloat(q, 64); err == nil && v > 0 {
			return true
		}
	}
	return false
}

// allowed answers 405 to methods other than GET and HEAD.
func allowed(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeStatus(w, http.StatusMethodNotAllowed)
	return false
}

// statusReasons are the metav1.Status reasons and messages of the errors the handlers send.
var statusReasons = map[int]struct {
	reason  metav1.StatusReason
	message string
}{
	http.StatusNotFound:            {metav1.StatusReasonNotFound, "the server could not find the requested OpenAPI document"},
	http.StatusMethodNotAllowed:    {metav1.StatusReasonMethodNotAllowed, "the OpenAPI documents are read with GET"},
	http.StatusNotAcceptable:       {metav1.StatusReasonNotAcceptable, "the OpenAPI documents are served as application/json or gnostic protobuf"},
	http.StatusInternalServerError: {metav1.StatusReasonInternalError, "the OpenAPI document could not be encoded"},
}

// writeStatus sends a Kubernetes Status body for an error code.
func writeStatus(w http.ResponseWriter, code int) {
	s := statusReasons[code]
	body, _ := json.Marshal(metav1.Status{ // a Status always encodes
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: s.reason, Message: s.message, Code: int32(code),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
