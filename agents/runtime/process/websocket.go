package process

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"
)

// k8s.io/cri-streaming serves exec and attach over SPDY and websocket channel
// protocols v1-v4, but client-go's websocket executor (kubectl since 1.30)
// speaks v5.channel.k8s.io, which adds closing a stream (stdin EOF). The
// runtime's handler serves v5 exec and attach itself and hands everything
// else to cri-streaming.
const (
	v5Protocol   = "v5.channel.k8s.io"
	execTokenTTL = time.Minute // as cri-streaming's request cache
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamError  = 3
	streamResize = 4
)

// execTokens remembers exec and attach requests (*runtimeapi.ExecRequest,
// *runtimeapi.AttachRequest) by the token of their URL, for v5.
type execTokens struct {
	mu      sync.Mutex // guards pending
	pending map[string]pendingExec
}

type pendingExec struct {
	req     any
	expires time.Time
}

// add records req under the token of url and forgets expired requests.
func (e *execTokens) add(url string, req any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for tok, p := range e.pending {
		if now.After(p.expires) {
			delete(e.pending, tok)
		}
	}
	if e.pending == nil {
		e.pending = map[string]pendingExec{}
	}
	e.pending[path.Base(url)] = pendingExec{req: req, expires: now.Add(execTokenTTL)}
}

// take returns and forgets the request of token (nil if unknown or expired).
func (e *execTokens) take(token string) any {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.pending[token]
	delete(e.pending, token)
	if !ok || time.Now().After(p.expires) {
		return nil
	}
	return p.req
}

// ServeHTTP is the streaming server's handler; Start serves it on the
// StreamAddr listener, consumers may also mount it elsewhere.
func (r *Runtime) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if kind := path.Base(path.Dir(req.URL.Path)); (kind == "exec" || kind == "attach") && wsstream.IsWebSocketRequestWithStreamCloseProtocol(req) {
		switch sreq := r.tokens.take(path.Base(req.URL.Path)).(type) {
		case *runtimeapi.ExecRequest:
			r.serveV5(w, req, v5Session{stdin: sreq.Stdin, stdout: sreq.Stdout, stderr: sreq.Stderr, tty: sreq.Tty},
				func(ctx context.Context, sio execIO) error { return r.execIn(ctx, sreq.ContainerId, sreq.Cmd, sio) })
			return
		case *runtimeapi.AttachRequest:
			r.serveV5(w, req, v5Session{stdin: sreq.Stdin, stdout: sreq.Stdout, stderr: sreq.Stderr, tty: sreq.Tty},
				func(ctx context.Context, sio execIO) error { return r.attachIn(ctx, sreq.ContainerId, sio) })
			return
		}
	}
	r.stream.ServeHTTP(w, req)
}

// v5Session are the streams an exec or attach asked for.
type v5Session struct{ stdin, stdout, stderr, tty bool }

// serveV5 runs an exec or attach over a v5.channel.k8s.io websocket.
func (r *Runtime) serveV5(w http.ResponseWriter, req *http.Request, s v5Session, run func(context.Context, execIO) error) {
	channels := []wsstream.ChannelType{
		enabled(s.stdin, wsstream.ReadChannel),
		enabled(s.stdout, wsstream.WriteChannel),
		enabled(s.stderr && !s.tty, wsstream.WriteChannel),
		wsstream.WriteChannel, // error: the final status
		enabled(s.tty, wsstream.ReadChannel),
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{v5Protocol: {Binary: true, Channels: channels}})
	conn.SetIdleTimeout(4 * time.Hour)
	_, streams, err := conn.Open(w, req)
	if err != nil {
		r.log.Error("websocket stream upgrade", "err", err)
		return
	}
	defer conn.Close()
	sio := execIO{tty: s.tty}
	if s.stdin {
		sio.stdin = streams[streamStdin]
	}
	if s.stdout {
		sio.stdout = streams[streamStdout]
	}
	if s.stderr && !s.tty {
		sio.stderr = streams[streamStderr]
	}
	if s.tty {
		resize := make(chan remotecommand.TerminalSize)
		go decodeResizes(streams[streamResize], resize)
		sio.resize = resize
	}
	err = run(req.Context(), sio)
	writeExecStatus(streams[streamError], err)
}

func enabled(on bool, t wsstream.ChannelType) wsstream.ChannelType {
	if on {
		return t
	}
	return wsstream.IgnoreChannel
}

// decodeResizes feeds the terminal sizes read from r to ch, closing it at the end.
func decodeResizes(r io.Reader, ch chan<- remotecommand.TerminalSize) {
	defer close(ch)
	dec := json.NewDecoder(r)
	for {
		var size remotecommand.TerminalSize
		if dec.Decode(&size) != nil {
			return
		}
		ch <- size
	}
}

// writeExecStatus writes the outcome of an exec on the error stream as the
// client expects it: a metav1.Status, with the exit code as a cause.
func writeExecStatus(w io.Writer, err error) {
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	if exitErr, ok := err.(utilexec.ExitError); ok && exitErr.Exited() {
		st.Status, st.Reason = metav1.StatusFailure, remotecommand.NonZeroExitCodeReason
		st.Message = fmt.Sprintf("command terminated with non-zero exit code: %v", exitErr)
		st.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type: remotecommand.ExitCodeCauseType, Message: fmt.Sprint(exitErr.ExitStatus()),
		}}}
	} else if err != nil {
		st.Status, st.Reason, st.Code = metav1.StatusFailure, metav1.StatusReasonInternalError, http.StatusInternalServerError
		st.Message = fmt.Sprintf("error executing command in container: %v", err)
	}
	b, _ := json.Marshal(st)
	_, _ = w.Write(b)
}
