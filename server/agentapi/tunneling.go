package agentapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/wheelhouse-dev/wheelhouse/agents/tunnel"
)

// kubectl (1.31+) port-forwards over a websocket whose subprotocol is "SPDY/3.1+portforward.k8s.io": the
// websocket's binary messages carry the bytes of a SPDY connection, which kube-apiserver passes on to the
// kubelet's SPDY port-forward. So does this server: it upgrades to SPDY on the kubelet first (an error there
// is still an API Status for the client), then upgrades the client's websocket and copies bytes both ways.
const (
	tunnelingPrefix = "SPDY/3.1+"
	// tunnelingPingPeriod keeps idle port-forwards alive through proxies that drop quiet connections.
	tunnelingPingPeriod = 30 * time.Second
)

// tunnelingProtocol returns the tunneled stream protocol a websocket request asks for ("portforward.k8s.io"),
// or "".
func tunnelingProtocol(r *http.Request) string {
	if !wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		return ""
	}
	for _, p := range websocket.Subprotocols(r) {
		if strings.HasPrefix(p, tunnelingPrefix) && strings.HasSuffix(p, ".k8s.io") {
			return strings.TrimPrefix(p, tunnelingPrefix)
		}
	}
	return ""
}

// tunnelSPDY serves a SPDY-over-websocket request r with protocol (see tunnelingProtocol) against t.
func (a *API) tunnelSPDY(w http.ResponseWriter, r *http.Request, cluster string, t target, protocol string) error {
	upstream, err := a.upgradeSPDY(r, cluster, t, protocol)
	if err != nil {
		return err
	}
	defer upstream.Close()
	// The default Origin check: kubectl sends none, a browser page of another site is refused.
	up := websocket.Upgrader{Subprotocols: []string{tunnelingPrefix + protocol}, HandshakeTimeout: 10 * time.Second}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return nil // Upgrade has answered the client
	}
	defer ws.Close()
	// The request's context ends when the API revokes the access it was granted (docs/design/revocation.md):
	// the bridge ends with it, not only when a side hangs up.
	stop := context.AfterFunc(r.Context(), func() {
		_ = ws.Close()
		upstream.Close()
	})
	defer stop()
	bridgeWebsocket(ws, upstream)
	return nil
}

// upgradeSPDY opens the SPDY connection of t on the node's kubelet, through its tunnel.
func (a *API) upgradeSPDY(r *http.Request, cluster string, t target, protocol string) (io.ReadWriteCloser, error) {
	u := &url.URL{Scheme: "http", Host: "kubelet", Path: t.path, RawQuery: t.query}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	req.Header.Set("X-Stream-Protocol-Version", protocol)
	res, err := a.cfg.Tunnels.Transport(cluster, t.node).RoundTrip(req)
	switch {
	case errors.Is(err, tunnel.ErrNotConnected):
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("node %s's agent is not connected", t.node))
	case err != nil:
		a.log.WarnContext(r.Context(), "port-forward to a node's agent failed", "cluster", cluster, "node", t.node, "err", err)
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the connection to node %s's agent failed", t.node))
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		defer res.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		st := apierrors.NewGenericServerResponse(res.StatusCode, "create", corev1.Resource("pods/portforward"), "", "", 0, false)
		if m := strings.TrimSpace(string(msg)); m != "" {
			st.ErrStatus.Message = m // the kubelet's words, as the SPDY proxy passes them on
		}
		return nil, st
	}
	rwc, ok := res.Body.(io.ReadWriteCloser)
	if !ok {
		res.Body.Close()
		return nil, apierrors.NewInternalError(errors.New("the kubelet's upgraded connection is not writable"))
	}
	return rwc, nil
}

// bridgeWebsocket copies ws's binary messages to upstream and upstream's bytes to ws as binary messages,
// until either side ends.
func bridgeWebsocket(ws *websocket.Conn, upstream io.ReadWriteCloser) {
	var once sync.Once
	stop := func() {
		once.Do(func() {
			upstream.Close()
			_ = ws.Close()
		})
	}
	var wmu sync.Mutex // gorilla allows one concurrent writer
	write := func(kind int, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(tunnelingPingPeriod))
		return ws.WriteMessage(kind, p)
	}
	done := make(chan struct{})
	go func() { // client → kubelet
		defer stop()
		for {
			kind, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if kind != websocket.BinaryMessage {
				continue
			}
			if _, err := upstream.Write(msg); err != nil {
				return
			}
		}
	}()
	go func() { // keepalive
		tick := time.NewTicker(tunnelingPingPeriod)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if write(websocket.PingMessage, nil) != nil {
					stop()
					return
				}
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for { // kubelet → client
		n, err := upstream.Read(buf)
		if n > 0 && write(websocket.BinaryMessage, buf[:n]) != nil {
			break
		}
		if err != nil {
			break
		}
	}
	close(done)
	wmu.Lock()
	_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	wmu.Unlock()
	stop()
}
