package shim

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// Attach: the shim owns the container's stdio, so it is the shim that serves
// attach sessions, on a unix socket in the container's directory (0700, so
// only root reaches it). It survives agent restarts with the shim, and an
// attach after a re-adoption works like any other.
//
// The socket speaks frames of a kind byte, a big-endian uint32 length and
// the payload. The shim sends output as it is produced (AttachStdout,
// AttachStderr) and closes the connection once the container has exited and
// its output is drained. The client sends stdin data (AttachStdin), the end
// of its stdin (AttachStdinEnd) and terminal sizes (AttachResize: uint16
// width, uint16 height). Output produced before the session began is not
// replayed (it is in the log), as with docker and containerd.
const (
	AttachSocket   = "attach.sock"
	AttachStdout   = 'o'
	AttachStderr   = 'e'
	AttachStdin    = 'i'
	AttachStdinEnd = 'c'
	AttachResize   = 'r'

	// MaxAttachFrame bounds a frame's payload; longer data is split.
	MaxAttachFrame = 32 << 10
	// attachBacklog is how many output frames may wait for one slow
	// session before the shim drops it: the container never waits for a
	// client.
	attachBacklog = 256
)

func WriteFrame(w io.Writer, kind byte, p []byte) error {
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), MaxAttachFrame)
		var hdr [5]byte
		hdr[0] = kind
		binary.BigEndian.PutUint32(hdr[1:], uint32(n))
		if _, err := w.Write(append(hdr[:], p[:n]...)); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

func ReadFrame(r io.Reader) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxAttachFrame {
		return 0, nil, fmt.Errorf("attach frame of %d bytes", n)
	}
	p := make([]byte, n)
	_, err := io.ReadFull(r, p)
	return hdr[0], p, err
}

// attachHub is the shim's side: it fans the container's output out to the
// attached sessions and feeds their input to the container's stdin.
type attachHub struct {
	listener  net.Listener
	stdin     io.WriteCloser // nil when the container has no stdin; the pty master with a tty
	pty       *os.File       // the pty master, for resizes; nil without a tty
	stdinOnce bool

	mu         sync.Mutex // guards the fields below
	sessions   map[*attachSession]struct{}
	stdinEnded bool // stdinOnce and a session ended its stdin
	closed     bool
}

type attachSession struct {
	conn net.Conn
	out  chan []byte // encoded frames
}

// listenAttach opens the attach socket of the container in dir. The path is
// reached through the shim's working directory: state directories can be
// deeper than a socket address allows.
func listenAttach(dir string) (net.Listener, error) {
	if err := os.Chdir(dir); err != nil {
		return nil, err
	}
	_ = os.Remove(AttachSocket)
	return net.Listen("unix", AttachSocket)
}

// DialAttach connects to the attach socket of the container in dir, through
// /proc/self/fd for the same reason.
func DialAttach(dir string) (net.Conn, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	conn, err := net.Dial("unix", fmt.Sprintf("/proc/self/fd/%d/%s", fd, AttachSocket))
	if err != nil {
		return nil, fmt.Errorf("connect to the container's shim: %w", err)
	}
	return conn, nil
}

func newAttachHub(l net.Listener, stdin io.WriteCloser, ptmx *os.File, stdinOnce bool) *attachHub {
	h := &attachHub{listener: l, stdin: stdin, pty: ptmx, stdinOnce: stdinOnce, sessions: map[*attachSession]struct{}{}}
	go h.accept()
	return h
}

func (h *attachHub) accept() {
	for {
		conn, err := h.listener.Accept()
		if err != nil {
			return
		}
		s := &attachSession{conn: conn, out: make(chan []byte, attachBacklog)}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			conn.Close()
			return
		}
		h.sessions[s] = struct{}{}
		h.mu.Unlock()
		go h.send(s)
		go h.receive(s)
	}
}

// send writes s's queued frames until the queue is closed.
func (h *attachHub) send(s *attachSession) {
	defer s.conn.Close()
	for frame := range s.out {
		if _, err := s.conn.Write(frame); err != nil {
			h.drop(s)
			for range s.out {
			}
			return
		}
	}
}

// receive applies s's stdin and resize frames.
func (h *attachHub) receive(s *attachSession) {
	defer h.drop(s)
	for {
		kind, p, err := ReadFrame(s.conn)
		if err != nil {
			return
		}
		switch kind {
		case AttachStdin:
			h.mu.Lock()
			w := h.stdin
			if h.stdinEnded {
				w = nil
			}
			h.mu.Unlock()
			if w != nil {
				_, _ = w.Write(p)
			}
		case AttachStdinEnd:
			h.endStdin()
		case AttachResize:
			if h.pty != nil && len(p) == 4 {
				_ = pty.Setsize(h.pty, &pty.Winsize{Cols: binary.BigEndian.Uint16(p), Rows: binary.BigEndian.Uint16(p[2:])})
			}
		}
	}
}

// endStdin closes the container's stdin when it is StdinOnce (not a pty's:
// closing the master would hang the terminal up).
func (h *attachHub) endStdin() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.stdinOnce || h.stdinEnded || h.stdin == nil {
		return
	}
	h.stdinEnded = true
	if h.pty == nil {
		h.stdin.Close()
	}
}

// drop forgets s; its sender closes the connection.
func (h *attachHub) drop(s *attachSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.sessions[s]; ok {
		delete(h.sessions, s)
		close(s.out)
	}
}

// writer returns the writer that fans output of kind out to the sessions.
func (h *attachHub) writer(kind byte) io.Writer { return hubWriter{h, kind} }

type hubWriter struct {
	h    *attachHub
	kind byte
}

func (w hubWriter) Write(p []byte) (int, error) {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	if len(w.h.sessions) == 0 {
		return len(p), nil
	}
	var buf bytesWriter
	_ = WriteFrame(&buf, w.kind, p)
	for s := range w.h.sessions {
		select {
		case s.out <- buf:
		default: // too slow: drop it rather than stall the container
			delete(w.h.sessions, s)
			close(s.out)
		}
	}
	return len(p), nil
}

type bytesWriter []byte

func (b *bytesWriter) Write(p []byte) (int, error) { *b = append(*b, p...); return len(p), nil }

// Close ends every session (after the output they were sent) and stops
// accepting new ones.
func (h *attachHub) Close() {
	h.listener.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.sessions {
		delete(h.sessions, s)
		close(s.out)
	}
}
