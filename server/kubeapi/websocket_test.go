package kubeapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWatchOverWebSocket(t *testing.T) {
	readPaths(t, func(t *testing.T, path func(*Config)) {
		env := newTestEnv(t, path)
		cs := env.client(t, "c1")
		ctx := t.Context()
		wsURL := "ws" + strings.TrimPrefix(env.url, "http") + Prefix("c1") + "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1"
		h := http.Header{"Authorization": {"Bearer " + adminToken}}

		if _, resp, err := websocket.DefaultDialer.DialContext(ctx, wsURL, http.Header{"Authorization": {"Bearer " + adminToken},
			"Origin": {"https://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("foreign Origin: err %v, response %v; want 403", err, resp)
		}
		if _, resp, err := websocket.DefaultDialer.DialContext(ctx, wsURL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("no token: err %v; want 401", err)
		}

		conn, _, err := websocket.DefaultDialer.DialContext(ctx, wsURL, h)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ws"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			var ev struct {
				Type   string           `json:"type"`
				Object corev1.ConfigMap `json:"object"`
			}
			if err := json.Unmarshal(msg, &ev); err != nil {
				t.Fatalf("message %q: %v", msg, err)
			}
			if ev.Object.Name == "ws" {
				if ev.Type != "ADDED" {
					t.Fatalf("event %s, want ADDED", ev.Type)
				}
				return
			}
		}
	})
}
