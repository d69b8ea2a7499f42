package process

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"path/filepath"
	"sync"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/wheelhouse-dev/wheelhouse/agents/runtime/process/shim"
)

// attachTo streams the output of the container in dir to out / errw and in
// to its stdin (if in is not nil) until the container exits or ctx ends.
func attachTo(ctx context.Context, dir string, in io.Reader, out, errw io.Writer, resize <-chan remotecommand.TerminalSize) error {
	conn, err := shim.DialAttach(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer conn.Close()
	var wmu sync.Mutex // frames from stdin and resize interleave whole
	send := func(kind byte, p []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return shim.WriteFrame(conn, kind, p)
	}
	if in != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := in.Read(buf)
				if n > 0 && send(shim.AttachStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					_ = send(shim.AttachStdinEnd, nil)
					return
				}
			}
		}()
	}
	if resize != nil {
		go func() {
			for size := range resize {
				var p [4]byte
				binary.BigEndian.PutUint16(p[:], size.Width)
				binary.BigEndian.PutUint16(p[2:], size.Height)
				if send(shim.AttachResize, p[:]) != nil {
					return
				}
			}
		}()
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	for {
		kind, p, err := shim.ReadFrame(conn)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		w := out
		if kind == shim.AttachStderr {
			w = errw
		}
		if w != nil {
			if _, err := w.Write(p); err != nil {
				return err
			}
		}
	}
}
