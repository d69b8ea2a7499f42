package perf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// tableAccept is what `kubectl get` asks for (its first choice): rows and columns made by the server.
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// listForm is one way of listing every pod of a namespace.
type listForm struct {
	key, label    string
	accept, query string
	// paged follows continue tokens until the last page; the whole sequence is one timed list.
	paged bool
}

// listForms are the lists the scenario times. resourceVersion unset is a consistent read (the cache first
// catches up with the store's current revision; without the cache it is a PostgreSQL snapshot);
// resourceVersion=0 lets the server answer from whatever recent state it has.
var listForms = []listForm{
	{key: "json", label: "JSON, consistent (resourceVersion unset)", accept: "application/json"},
	{key: "json-rv0", label: "JSON, resourceVersion=0", accept: "application/json", query: "resourceVersion=0"},
	{key: "table", label: "Table, consistent (kubectl get without paging)", accept: tableAccept},
	{key: "table-paged", label: "Table, pages of 500 (kubectl get: limit=500 + continue)", accept: tableAccept,
		query: "limit=500", paged: true},
}

func formLabel(key string) string {
	for _, f := range listForms {
		if f.key == key {
			return f.label
		}
	}
	return key
}

// listScenario times every list form against the pods loaded into nsList: one untimed warm-up (which also checks
// that every pod comes back), then ListRepetitions timed lists, with the server's CPU over the timed ones.
func (r *apiRunner) listScenario(ctx context.Context, t *apiTarget) ListScenario {
	res := ListScenario{Pods: r.cfg.ListPods}
	var buf bytes.Buffer // reused: the harness should not spend the measured time growing buffers
	for _, f := range listForms {
		res.Forms = append(res.Forms, r.timeListForm(ctx, t, f, &buf))
		if ctx.Err() != nil {
			break
		}
	}
	res.ServerRSS = t.srv.rss()
	if err := t.srv.alive(); err != nil {
		res.Err = err.Error()
	}
	return res
}

func (r *apiRunner) timeListForm(ctx context.Context, t *apiTarget, f listForm, buf *bytes.Buffer) ListForm {
	out := ListForm{Key: f.key}
	warm, err := listOnce(ctx, t.srv, f, buf, true)
	if err == nil && warm.items != r.cfg.ListPods {
		err = fmt.Errorf("warm-up list returned %d items, want %d", warm.items, r.cfg.ListPods)
	}
	if err != nil {
		out.Err = err.Error()
		return out
	}
	out.Items, out.Bytes, out.Pages = warm.items, warm.bytes, warm.pages
	m := newAPIMeter(t.srv.pid(), r.pg.procs())
	for range r.cfg.ListRepetitions {
		t0 := time.Now()
		l, err := listOnce(ctx, t.srv, f, buf, false)
		d := time.Since(t0)
		if err != nil {
			out.Err = err.Error()
			return out
		}
		out.Durations = append(out.Durations, d)
		out.Bytes = l.bytes
	}
	out.ServerCPU = m.seconds().Server / float64(r.cfg.ListRepetitions)
	out.OtherCPU = m.cores().Other
	return out
}

// listed is what one (possibly paged) list returned.
type listed struct {
	bytes int64
	pages int
	items int // counted only when asked: decoding is client-side work the timing leaves out
}

// listOnce lists every pod of nsList in form f over plain HTTP, reading every body in full. It decodes nothing
// unless count is set, except the continue token of a paged list.
func listOnce(ctx context.Context, s *apiServer, f listForm, buf *bytes.Buffer, count bool) (listed, error) {
	var l listed
	cont := ""
	for {
		q := f.query
		if cont != "" {
			q += "&continue=" + url.QueryEscape(cont)
		}
		if err := getInto(ctx, s, "/api/v1/namespaces/"+nsList+"/pods?"+q, f.accept, buf); err != nil {
			return l, err
		}
		l.bytes += int64(buf.Len())
		l.pages++
		var err error
		if count {
			var n int
			n, cont, err = countItems(buf.Bytes())
			l.items += n
		} else if f.paged {
			cont, err = continueToken(buf.Bytes())
		}
		if err != nil {
			return l, fmt.Errorf("%s page %d: %w", f.key, l.pages, err)
		}
		if !f.paged || cont == "" {
			return l, nil
		}
	}
}

// getInto GETs path under the cluster's API base into buf.
func getInto(ctx context.Context, s *apiServer, path, accept string, buf *bytes.Buffer) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.apiBase+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", accept)
	res, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(res.Body); err != nil {
		return fmt.Errorf("GET %s: reading the body: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %.300s", path, res.Status, strings.TrimSpace(buf.String()))
	}
	return nil
}

// countItems decodes a list or Table body: its item (row) count and continue token.
func countItems(body []byte) (int, string, error) {
	var v struct {
		Kind     string            `json:"kind"`
		Items    []json.RawMessage `json:"items"`
		Rows     []json.RawMessage `json:"rows"`
		Metadata struct {
			Continue string `json:"continue"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return 0, "", err
	}
	if v.Kind == "Table" {
		return len(v.Rows), v.Metadata.Continue, nil
	}
	return len(v.Items), v.Metadata.Continue, nil
}

// continueToken reads metadata.continue of a list or Table body, skipping the other top-level fields without
// decoding them (the server writes metadata before items and rows, so this reads only the head of the body).
func continueToken(body []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", fmt.Errorf("not a JSON object (%v)", err)
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		var meta struct {
			Continue string `json:"continue"`
		}
		err = dec.Decode(&meta)
		return meta.Continue, err
	}
	return "", nil
}
