package kubelet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Following a log polls its file (no inotify is assumed): new lines are read every logPollInterval, and the
// container's state is checked every logStateInterval to end the stream once it has exited and its log is
// drained.
const (
	logPollInterval  = 100 * time.Millisecond
	logStateInterval = time.Second
)

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container} as kubelet does: the messages of the
// container's CRI log (its rotated files first, oldest first, then the live one), partial lines joined, with
// PodLogOptions from the query (follow, previous, tailLines, sinceSeconds, sinceTime, timestamps, limitBytes).
// tailLines counts whole lines. With follow, the stream goes on across rotations until the client goes away
// or the container has exited and its log is drained; output is flushed whenever the reader has caught up.
func (a *api) containerLogs(w http.ResponseWriter, r *http.Request) {
	opts, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	c, err := a.logContainer(r, opts.previous)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	bw := bufio.NewWriterSize(w, 32<<10)
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return http.NewResponseController(w).Flush()
	}
	alive := func(ctx context.Context) bool {
		st, err := a.rt.ContainerStatus(ctx, c.Id, false)
		return err == nil && st.Status.State != runtimeapi.ContainerState_CONTAINER_EXITED
	}
	if err := streamLog(r.Context(), bw, flush, c.LogPath, opts, alive); err != nil && r.Context().Err() == nil {
		a.log.DebugContext(r.Context(), "streaming a container log ended", "path", c.LogPath, "err", err)
	}
	_ = flush()
}

// logContainer is the instance whose log a request reads, with the errors of kubelet's
// validateContainerLogStatus: the latest instance, or with previous the one before it. A container that
// exited and is going to be restarted (kubelet shows it waiting, with it as its last state) is both: its log
// is what `logs` and `logs --previous` show until the next instance starts.
func (a *api) logContainer(r *http.Request, previous bool) (*runtimeapi.ContainerStatus, error) {
	ref, err := a.findPod(r.Context(), r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		return nil, err
	}
	name := r.PathValue("container")
	in, err := a.containerInstances(r.Context(), ref, name)
	if err != nil {
		return nil, err
	}
	cur := in.latest()
	restarting := cur != nil && cur.State == runtimeapi.ContainerState_CONTAINER_EXITED && ref.pod != nil &&
		willRestart(ref.pod, name, cur.ExitCode)
	var c *runtimeapi.ContainerStatus
	switch {
	case previous && restarting:
		c = cur
	case previous:
		if p := in.previous(); p != nil && p.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			c = p
		} else {
			return nil, errorf(http.StatusBadRequest, "previous terminated container %q in pod %q not found", name, ref.name)
		}
	case cur == nil || cur.State == runtimeapi.ContainerState_CONTAINER_CREATED || cur.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN:
		return nil, errorf(http.StatusBadRequest, "container %q in pod %q is waiting to start: %s", name, ref.name, waitingReason(ref.pod, name))
	default:
		c = cur
	}
	if c.LogPath == "" {
		return nil, errorf(http.StatusBadRequest, "container %q in pod %q has no log file", name, ref.name)
	}
	return c, nil
}

// willRestart reports whether the pod's container name, having exited with code, is started again.
func willRestart(pod *corev1.Pod, name string, code int32) bool {
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.Name == name {
			return isSidecar(c) || (code != 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyNever)
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return shouldRestart(pod.Spec.RestartPolicy, code)
		}
	}
	return false
}

// waitingReason is why a container without an instance waits, from the pod's status (ContainerCreating when
// it says nothing).
func waitingReason(pod *corev1.Pod, name string) string {
	if pod != nil {
		for _, cs := range slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses) {
			if cs.Name == name && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
				return cs.State.Waiting.Reason
			}
		}
	}
	return "ContainerCreating"
}

// logOptions are a log request's options (PodLogOptions as kubelet's log reader takes them).
type logOptions struct {
	follow, previous, timestamps bool
	tail                         int64     // lines from the end; -1: all
	since                        time.Time // entries before are skipped; zero: none
	limit                        int64     // bytes; -1: no limit
}

// parseLogOptions reads PodLogOptions from q as kubelet does (with its legacy "tail", "all" meaning every line)
// and validates them; booleans as the API's parameter codec reads them (absent, "false" or "0": false), now
// anchors sinceSeconds.
func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	opts := logOptions{follow: flag(q, "follow"), previous: flag(q, "previous"), timestamps: flag(q, "timestamps"), tail: -1, limit: -1}
	tailKey := "tailLines"
	if tail := q.Get("tail"); tail != "" {
		tailKey = "tail"
		if tail == "all" {
			tailKey = ""
		}
	}
	for _, p := range []struct {
		key string
		dst *int64
		min int64
	}{{tailKey, &opts.tail, 0}, {"limitBytes", &opts.limit, 1}, {"sinceSeconds", nil, 1}} {
		v := q.Get(p.key)
		if p.key == "" || v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return opts, errorf(http.StatusBadRequest, "%s: %q is not an integer", p.key, v)
		}
		if n < p.min {
			return opts, errorf(http.StatusBadRequest, "%s: must be greater than or equal to %d", p.key, p.min)
		}
		if p.dst != nil {
			*p.dst = n
		} else {
			opts.since = now.Add(-time.Duration(n) * time.Second)
		}
	}
	if v := q.Get("sinceTime"); v != "" {
		if q.Get("sinceSeconds") != "" {
			return opts, errorf(http.StatusBadRequest, "at most one of sinceTime or sinceSeconds may be specified")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return opts, errorf(http.StatusBadRequest, "sinceTime: %q is not an RFC 3339 time", v)
		}
		opts.since = t
	}
	return opts, nil
}

// flag reads a boolean parameter.
func flag(q url.Values, key string) bool {
	v, ok := q[key]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && !strings.EqualFold(v[0], "false")
}

// criEntry is one line of a CRI log: "<RFC3339Nano> <stdout|stderr> <tag>[:<more tags>] <content>".
type criEntry struct {
	ts      time.Time
	stream  string
	partial bool   // tag P: the line goes on in the next entry of the stream
	content []byte // without the newline
}

var errMalformedEntry = errors.New("kubelet: malformed CRI log line")

// parseCRIEntry parses a log line (without its newline).
func parseCRIEntry(line []byte) (criEntry, error) {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return criEntry{}, errMalformedEntry
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return criEntry{}, fmt.Errorf("%w: timestamp %q", errMalformedEntry, ts)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != string(runtimeapi.Stdout) && string(stream) != string(runtimeapi.Stderr)) {
		return criEntry{}, fmt.Errorf("%w: stream %q", errMalformedEntry, stream)
	}
	tags, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return criEntry{}, fmt.Errorf("%w: no tag", errMalformedEntry)
	}
	tag, _, _ := bytes.Cut(tags, []byte{':'})
	return criEntry{ts: t, stream: string(stream), partial: string(tag) == string(runtimeapi.LogTagPartial), content: content}, nil
}

// entryWriter writes entries' messages as kubelet's log writer: a full entry's content and a newline, a
// partial one's content alone; with timestamps, each line is prefixed with its first entry's time and a space;
// entries before since are skipped; output stops at limit bytes (cut mid-line) or after lines whole lines.
type entryWriter struct {
	w        io.Writer
	opts     logOptions
	remain   int64           // bytes left; <0: no limit
	lines    int64           // lines left; <0: no limit
	midLine  map[string]bool // by stream: the last entry written was partial
	finished bool
}

func newEntryWriter(w io.Writer, opts logOptions) *entryWriter {
	ew := &entryWriter{w: w, opts: opts, remain: opts.limit, lines: -1, midLine: map[string]bool{}}
	if !opts.follow {
		ew.lines = opts.tail // a log that grows meanwhile still gives the last tail lines only
	}
	ew.finished = ew.lines == 0
	return ew
}

// write writes e; it reports errDone once the limits are reached.
func (ew *entryWriter) write(e criEntry) error {
	if ew.finished {
		return errDone
	}
	if !ew.opts.since.IsZero() && e.ts.Before(ew.opts.since) {
		return ew.countLine(e)
	}
	var b []byte
	if ew.opts.timestamps && !ew.midLine[e.stream] {
		b = e.ts.AppendFormat(b, time.RFC3339Nano)
		b = append(b, ' ')
	}
	b = append(b, e.content...)
	if !e.partial {
		b = append(b, '\n')
	}
	ew.midLine[e.stream] = e.partial
	if ew.remain >= 0 && int64(len(b)) >= ew.remain {
		b, ew.finished = b[:ew.remain], true
	}
	n, err := ew.w.Write(b)
	if ew.remain >= 0 {
		ew.remain -= int64(n)
	}
	if err != nil {
		return err
	}
	if ew.finished {
		return errDone
	}
	return ew.countLine(e)
}

// countLine counts e against the line limit.
func (ew *entryWriter) countLine(e criEntry) error {
	if ew.lines > 0 && !e.partial {
		ew.lines--
		if ew.lines == 0 {
			ew.finished = true
			return errDone
		}
	}
	return nil
}

// errDone ends a log stream that reached its limits.
var errDone = errors.New("kubelet: log limit reached")

// streamLog writes the log whose live file is path to w per opts. With follow it keeps reading, across
// rotations, until ctx ends or alive reports the container stopped and everything it wrote has been read;
// flush is called whenever the reader has caught up with the writer.
func streamLog(ctx context.Context, w io.Writer, flush func() error, path string, opts logOptions, alive func(context.Context) bool) error {
	ew := newEntryWriter(w, opts)
	if ew.finished {
		return nil
	}
	f, off, err := tailStart(path, opts.tail)
	if err != nil {
		return err
	}
	fr := &fileReader{path: path}
	defer fr.close()
	if f != nil {
		fr.use(f, off)
	}
	err = followLog(ctx, fr, ew, flush, opts.follow, alive)
	if errors.Is(err, errDone) {
		return nil
	}
	return err
}

// followLog copies entries from fr to ew until the log is drained (without follow: read to its end).
func followLog(ctx context.Context, fr *fileReader, ew *entryWriter, flush func() error, follow bool, alive func(context.Context) bool) error {
	stopped := !follow
	var lastCheck time.Time // the first check is at the first end of the file
	tick := time.NewTicker(logPollInterval)
	defer tick.Stop()
	for {
		if err := fr.copyTo(ew); err != nil {
			return err
		}
		moved, err := fr.advance()
		if err != nil {
			return err
		}
		if moved {
			continue // read the next file (or the rest of the rotated one) before waiting
		}
		if stopped {
			return fr.finish(ew)
		}
		if err := flush(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Since(lastCheck) >= logStateInterval {
			lastCheck = time.Now()
			stopped = !alive(ctx) // one more pass reads what the container wrote last
		}
	}
}

// fileReader reads the entries of one log file at a time and moves on to the next when it is rotated away.
type fileReader struct {
	path    string // the live file
	f       *os.File
	br      *bufio.Reader
	pending []byte // the start of a line not yet complete
	final   bool   // f was rotated away and has been read to its end once after: move on
}

func (fr *fileReader) use(f *os.File, off int64) {
	fr.close()
	fr.f, fr.br, fr.pending, fr.final = f, bufio.NewReaderSize(f, 64<<10), nil, false
	if off > 0 {
		_, _ = f.Seek(off, io.SeekStart)
		fr.br.Reset(f)
	}
}

func (fr *fileReader) close() {
	if fr.f != nil {
		fr.f.Close()
		fr.f = nil
	}
}

// copyTo writes the complete lines available in the current file to ew.
func (fr *fileReader) copyTo(ew *entryWriter) error {
	if fr.f == nil {
		return nil
	}
	for {
		chunk, err := fr.br.ReadSlice('\n')
		switch {
		case err == nil:
			line := chunk[:len(chunk)-1]
			if len(fr.pending) > 0 {
				line = append(fr.pending, line...)
				fr.pending = fr.pending[:0]
			}
			if werr := writeLine(ew, line); werr != nil {
				return werr
			}
		case errors.Is(err, bufio.ErrBufferFull):
			fr.pending = append(fr.pending, chunk...)
		case errors.Is(err, io.EOF):
			fr.pending = append(fr.pending, chunk...)
			return nil
		default:
			return fmt.Errorf("kubelet: reading %s: %w", fr.f.Name(), err)
		}
	}
}

// writeLine writes one line's entry; malformed lines are skipped, as kubelet does.
func writeLine(ew *entryWriter, line []byte) error {
	e, err := parseCRIEntry(line)
	if err != nil {
		return nil
	}
	return ew.write(e)
}

// finish writes a last line without its newline (a writer that stopped mid-line).
func (fr *fileReader) finish(ew *entryWriter) error {
	if len(fr.pending) == 0 {
		return nil
	}
	err := writeLine(ew, fr.pending)
	fr.pending = nil
	return err
}

// advance moves to the next file when the current one has been rotated away (once it was read to its end
// after the rotation: the writer closes a file before renaming it), or opens the live file when there was
// none. It reports whether it moved.
func (fr *fileReader) advance() (bool, error) {
	live, err := os.Stat(fr.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // mid-rotation, or not written yet
		}
		return false, err
	}
	if fr.f == nil {
		return fr.open(fr.path)
	}
	cur, err := fr.f.Stat()
	if err != nil {
		return false, err
	}
	if os.SameFile(cur, live) {
		return false, nil
	}
	if !fr.final {
		fr.final = true
		return true, nil // read what was written before the rotation
	}
	next := fr.path
	if rotated := rotatedFiles(fr.path); len(rotated) > 0 {
		if i := slices.IndexFunc(rotated, func(p string) bool { return sameFile(p, cur) }); i >= 0 && i+1 < len(rotated) {
			next = rotated[i+1]
		}
	}
	return fr.open(next)
}

// open makes path the current file; a file pruned meanwhile is skipped at the next advance.
func (fr *fileReader) open(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	fr.use(f, 0)
	return true, nil
}

func sameFile(path string, fi os.FileInfo) bool {
	st, err := os.Stat(path)
	return err == nil && os.SameFile(st, fi)
}

// rotatedSuffix is the suffix the runtime gives rotated files: .<YYYYMMDD-hhmmss>[-<n>].
var rotatedSuffix = regexp.MustCompile(`^\.[0-9]{8}-[0-9]{6}(-[0-9]+)?$`)

// rotatedFiles are the rotated files of the log at path, oldest first.
func rotatedFiles(path string) []string {
	matches, _ := filepath.Glob(globEscape(path) + ".*")
	out := matches[:0]
	for _, m := range matches {
		if rotatedSuffix.MatchString(m[len(path):]) {
			out = append(out, m)
		}
	}
	slices.Sort(out) // timestamps sort chronologically; a -n suffix after its plain twin
	return out
}

// globEscape escapes the glob metacharacters of a path.
func globEscape(path string) string {
	var b []byte
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '*', '?', '[', '\\':
			b = append(b, '\\', c)
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// tailStart opens the file where the last tail lines of the log begin (its rotated files first, then the
// live one; tail < 0: the oldest file, from its start) and returns it with the offset of that line. It
// returns a nil file when the log has no files yet.
func tailStart(path string, tail int64) (*os.File, int64, error) {
	files := append(rotatedFiles(path), path)
	if tail < 0 {
		for _, p := range files {
			if f, err := os.Open(p); err == nil {
				return f, 0, nil
			}
		}
		return nil, 0, nil
	}
	var oldest *os.File
	for i := len(files) - 1; i >= 0; i-- {
		f, err := os.Open(files[i])
		if err != nil {
			continue // pruned meanwhile, or the live file is not there yet
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		off, n, err := tailOffset(f, st.Size(), tail)
		if err != nil || n >= tail {
			if oldest != nil {
				oldest.Close()
			}
			return f, off, err
		}
		tail -= n
		if oldest != nil {
			oldest.Close()
		}
		oldest = f
	}
	return oldest, 0, nil
}

// tailOffset finds where the last n lines of f[0:size) begin, reading backwards; it returns that offset and
// how many lines it found (fewer than n: the whole file, offset 0). A line ends with a full (F) entry; the
// partial (P) entries before it belong to it (whatever their stream: interleaved partial lines of both streams
// are not told apart), entries after the last full one make a line of their own, and malformed lines, which
// are not written, do not count.
func tailOffset(f io.ReaderAt, size, n int64) (int64, int64, error) {
	if n == 0 {
		return size, 0, nil
	}
	var count, off int64
	done := false
	pending := false // entries after the current position that do not make a counted line yet
	hdr := make([]byte, 64)
	err := scanLinesBackward(f, size, func(start, end int64) bool {
		k, _ := f.ReadAt(hdr[:min(int64(len(hdr)), end-start)], start)
		e, perr := parseCRIEntry(hdr[:k])
		if perr != nil {
			return true // skipped when written, not counted
		}
		if !e.partial && pending {
			count++
			if count == n {
				off, done = min(end+1, size), true
				return false
			}
		}
		pending = true
		return true
	})
	if err != nil || done {
		return off, count, err
	}
	if pending {
		count++
	}
	return 0, count, nil
}

// scanLinesBackward calls fn with the start and end (the newline's offset, or size) of each line of
// f[0:size), last line first, until fn returns false.
func scanLinesBackward(f io.ReaderAt, size int64, fn func(start, end int64) bool) error {
	buf := make([]byte, 32<<10)
	end := size
	if size > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], size-1); err != nil {
			return err
		}
		if last[0] == '\n' {
			end = size - 1
		}
	}
	pos := end
	for pos > 0 {
		k := min(int64(len(buf)), pos)
		if _, err := f.ReadAt(buf[:k], pos-k); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		for i := k - 1; i >= 0; i-- {
			if buf[i] == '\n' {
				start := pos - k + i + 1
				if !fn(start, end) {
					return nil
				}
				end = start - 1
			}
		}
		pos -= k
	}
	if size > 0 {
		fn(0, end)
	}
	return nil
}
