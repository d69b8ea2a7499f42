package process

import (
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

// k8s.io/cri-streaming serves exec over SPDY and websocket channel protocols
// v1-v4, but client-go's websocket executor (kubectl since 1.30) speaks
// v5.channel.k8s.io, which adds closing a stream (stdin EOF). The runtime's
// handler serves v5 exec itself and hands everything else to cri-streaming.
const (
	v5Protocol   = "v5.channel.k8s.io"
	execTokenTTL = time.Minute // as cri-streaming's request cache
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamError  = 3
	streamResize = 4
)

// execTokens remembers exec requests by the token of their URL, for v5.
type execTokens struct {
	mu      sync.Mutex // guards pending
	pending map[string]pendingExec
}

type pendingExec struct {
	req     *runtimeapi.ExecRequest
	expires time.Time
}

// add records req under the token of url and forgets expired requests.
func (e *execTokens) add(url string, req *runtimeapi.ExecRequest) {
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
func (e *execTokens) take(token string) *runtimeapi.ExecRequest {
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
	if path.Base(path.Dir(req.URL.Path)) == "exec" && wsstream.IsWebSocketRequestWithStreamCloseProtocol(req) {
		if execReq := r.tokens.take(path.Base(req.URL.Path)); execReq != nil {
			r.serveExecV5(w, req, execReq)
			return
		}
	}
	r.stream.ServeHTTP(w, req)
}

// serveExecV5 runs an exec over a v5.channel.k8s.io websocket.
func (r *Runtime) serveExecV5(w http.ResponseWriter, req *http.Request, execReq *runtimeapi.ExecRequest) {
	channels := []wsstream.ChannelType{
		enabled(execReq.Stdin, wsstream.ReadChannel),
		enabled(execReq.Stdout, wsstream.WriteChannel),
		enabled(execReq.Stderr && !execReq.Tty, wsstream.WriteChannel),
		wsstream.WriteChannel, // error: the final status
		enabled(execReq.Tty, wsstream.ReadChannel),
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{v5Protocol: {Binary: true, Channels: channels}})
	conn.SetIdleTimeout(4 * time.Hour)
	_, streams, err := conn.Open(w, req)
	if err != nil {
		r.log.Error("websocket exec upgrade", "err", err)
		return
	}
	defer conn.Close()
	sio := execIO{tty: execReq.Tty}
	if execReq.Stdin {
		sio.stdin = streams[streamStdin]
	}
	if execReq.Stdout {
		sio.stdout = streams[streamStdout]
	}
	if execReq.Stderr && !execReq.Tty {
		sio.stderr = streams[streamStderr]
	}
	if execReq.Tty {
		resize := make(chan remotecommand.TerminalSize)
		go decodeResizes(streams[streamResize], resize)
		sio.resize = resize
	}
	err = r.execIn(req.Context(), execReq.ContainerId, execReq.Cmd, sio)
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
