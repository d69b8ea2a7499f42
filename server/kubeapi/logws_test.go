package kubeapi

import (
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// chunkLogs is a Connector whose pod logs are chunks written one by one; a pod named "missing" has no such
// container (400 before anything is written).
type chunkLogs struct{ chunks []string }

func (c chunkLogs) Connect(w http.ResponseWriter, r *http.Request, req ConnectRequest) error {
	if req.Subresource != "log" {
		return apierrors.NewBadRequest("only logs here")
	}
	if r.Header.Get("Upgrade") != "" {
		return apierrors.NewBadRequest("the Connector saw the upgrade")
	}
	if req.Object.(*corev1.Pod).Name == "missing" {
		return apierrors.NewBadRequest(`container "nope" is not valid for pod "missing"`)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	for _, s := range c.chunks {
		if _, err := io.WriteString(w, s); err != nil {
			return err
		}
		w.(http.Flusher).Flush()
	}
	return nil
}

// TestLogsOverWebSocket: pods/log asked for as a WebSocket (upstream's binary.k8s.io and base64.binary.k8s.io
// protocols) streams the log as messages and closes normally at its end; an error before the log is an HTTP
// Status, not an upgrade.
func TestLogsOverWebSocket(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Connector = chunkLogs{chunks: []string{"container is alive\n", "second line\n"}} })
	cs := env.client(t, "c1")
	ctx := t.Context()
	for _, name := range []string{"web", "missing"} {
		if _, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	wsURL := "ws" + strings.TrimPrefix(env.url, "http") + Prefix("c1") + "/api/v1/namespaces/default/pods/%s/log?container=main"
	dial := func(pod, protocol string) (*websocket.Conn, *http.Response, error) {
		d := websocket.Dialer{Subprotocols: []string{protocol}}
		// Upstream's e2e framework sends this Origin.
		return d.DialContext(ctx, strings.Replace(wsURL, "%s", pod, 1), http.Header{"Authorization": {"Bearer " + adminToken},
			"Origin": {"http://localhost"}})
	}
	read := func(conn *websocket.Conn, wantType int) []string {
		t.Helper()
		var msgs []string
		for {
			typ, b, err := conn.ReadMessage()
			if err != nil {
				if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					t.Fatalf("the stream ended with %v, want a normal closure", err)
				}
				return msgs
			}
			if typ != wantType {
				t.Errorf("message type %d, want %d", typ, wantType)
			}
			msgs = append(msgs, string(b))
		}
	}
	conn, resp, err := dial("web", "binary.k8s.io")
	if err != nil {
		t.Fatalf("dial: %v %v", resp, err)
	}
	if conn.Subprotocol() != "binary.k8s.io" {
		t.Errorf("subprotocol %q", conn.Subprotocol())
	}
	if got := strings.Join(read(conn, websocket.BinaryMessage), ""); got != "container is alive\nsecond line\n" {
		t.Errorf("binary log: %q", got)
	}
	conn.Close()

	conn, _, err = dial("web", "base64.binary.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, m := range read(conn, websocket.TextMessage) {
		b, err := base64.StdEncoding.DecodeString(m)
		if err != nil {
			t.Fatalf("message %q is not base64: %v", m, err)
		}
		got.Write(b)
	}
	conn.Close()
	if got.String() != "container is alive\nsecond line\n" {
		t.Errorf("base64 log: %q", got.String())
	}

	_, resp, err = dial("missing", "binary.k8s.io")
	if !errors.Is(err, websocket.ErrBadHandshake) || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("log of a missing container: %v %v, want 400 without an upgrade", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"kind":"Status"`) || !strings.Contains(string(body), "is not valid for pod") {
		t.Errorf("error body %s", body)
	}
}
